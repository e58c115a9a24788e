"""Distillation in small steps (`distill_mode = steps`): one small question per person's
message, per possible revision, for the summary and for the quotes — put together and
checked as the whole form's answer is, and chosen by `auto` for a constrained model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from llm_double import ScriptedLLMServer
from support.distilling import (
    distill_answer,
    earlier,
    is_distillation,
    is_recheck,
    judged,
    last_refused,
    step_answer,
    step_of,
)

from charlie import conversations
from charlie.conversations import Channel, Message, shared_channel
from charlie.errors import DistillationError
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.memory import distill, steps
from charlie.memory import layers as memory
from charlie.memory.layers import HAND, Decision, Memory
from charlie.projects import create_project, update_project
from charlie.users import User, ensure_user


@pytest.fixture
def kitchen(home: Home) -> tuple[Channel, User, User]:
    create_project(home, "Kitchen", distill_every=1000)
    channel = shared_channel(home, update_project(home, "kitchen", distill_mode="steps"))
    memory.ensure_file(home, channel)
    return channel, ensure_user(home.db, "sam"), ensure_user(home.db, "alex")


def talk(home: Home, channel: Channel, *lines: tuple[User | None, str]) -> list[Message]:
    return [
        conversations.add_message(home, channel, "user" if who else "assistant", text, user=who)
        for who, text in lines
    ]


def steps_asked(llm: ScriptedLLMServer) -> list[str | None]:
    return [step_of(r) for r in llm.requests]


def test_each_persons_message_is_judged_alone_and_only_decisions_are_kept(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, alex = kitchen
    said = talk(
        home,
        channel,
        (sam, "Maybe we should paint the ceiling yellow."),
        (None, "Noted."),
        (alex, "Dinner is pasta, as usual."),
        (sam, "Should we move the fridge?"),
        (sam, "Where does it go then? I vote by the window."),  # opens with a question: offers
        (alex, "We decided: the worktops are solid oak."),
    )
    llm.default = step_answer
    result = distill.distill(home, channel, client)
    assert result.method == "steps" and result.structured
    # Charlie's message and the questions are not asked about: three messages, a summary, quotes
    assert steps_asked(llm) == ["decision", "decision", "decision", "summary", "quotes"]
    assert [str(r["messages"][1]["content"]).rsplit("\n", 1)[-1] for r in llm.requests[:3]] == [
        "sam: Maybe we should paint the ceiling yellow.",
        "alex: Dinner is pasta, as usual.",
        "alex: We decided: the worktops are solid oak.",
    ]
    (decision,) = result.memory.decisions
    assert decision.text == "We decided: the worktops are solid oak."
    assert decision.sources == (said[5].id,)
    assert result.memory.summary == "Planning the kitchen."
    schema = llm.requests[0]["response_format"]["json_schema"]
    assert schema["name"] == "decision"
    assert "settles something" in schema["schema"]["properties"]["kind"]["enum"]


def test_the_message_before_is_shown_for_context(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, alex = kitchen
    talk(home, channel, (sam, "Maybe oak worktops."), (alex, "Yes, let's do that."))
    answers = iter(
        [
            {"kind": steps.IDEA, "what": ""},
            {"kind": steps.SETTLES, "what": "The worktops are oak."},
        ]
    )
    llm.default = lambda r: (
        json.dumps(next(answers)) if step_of(r) == "decision" else step_answer(r)
    )
    result = distill.distill(home, channel, client)
    assert "Just before (context only):\nsam: Maybe oak worktops." in str(
        llm.requests[1]["messages"][1]["content"]
    )
    assert result.memory.texts == ["The worktops are oak."]


def test_a_change_of_plan_supersedes_the_decision_it_names(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, alex = kitchen
    llm.default = step_answer
    talk(home, channel, (sam, "We decided: the plumber comes on Tuesday 9 December."))
    distill.distill(home, channel, client)
    llm.requests.clear()
    said = talk(
        home,
        channel,
        (alex, "Change of plan: the plumber comes on Thursday 11 December, not Tuesday."),
        (sam, "Let's go with green metro tiles."),
    )
    result = distill.distill(home, channel, client)
    changes = [r for r in llm.requests if step_of(r) == "change"]
    # only the decision that shares words with a held one is checked against it: once by
    # the judge, then by its two second looks, each worded its own way
    assert [is_recheck(r) for r in changes] == [False, True, True]
    assert len({r["messages"][0]["content"] for r in changes}) == 3
    for change in changes:
        assert "Earlier decision: the plumber comes on Tuesday 9 December." in str(
            change["messages"][1]["content"]
        )
    assert result.memory.texts == [
        "the plumber comes on Thursday 11 December",
        "green metro tiles.",
    ]
    (earlier,) = result.memory.earlier
    assert earlier.text == "the plumber comes on Tuesday 9 December."
    assert earlier.changed_by == said[0].id


@pytest.mark.parametrize("answers", ["a copy", "no JSON"])
@pytest.mark.parametrize("changing", [(0,), (0, 1), (0, 2), (1, 2), (0, 1, 2)])
def test_a_change_holds_only_when_every_look_makes_it(
    home: Home,
    llm: ScriptedLLMServer,
    client: LLMClient,
    kitchen: tuple[Channel, User, User],
    changing: tuple[int, ...],
    answers: str,
) -> None:
    """The judge is asked three ways (`steps.LOOKS`); the looks in `changing` rewrite the
    decision, the others copy it as it was or answer nothing usable: one wording's slip
    retires nothing, and a look is asked only while every look before made the change."""
    channel, sam, alex = kitchen

    def answer(request: dict[str, Any]) -> str:
        if step_of(request) != "change":
            return step_answer(request)
        if steps.LOOKS.index(request["messages"][0]["content"]) in changing:
            return step_answer(request)
        return json.dumps({"now": earlier(request)}) if answers == "a copy" else "Hmm, let me see."

    llm.default = answer
    talk(home, channel, (sam, "We decided: the plumber comes on Tuesday 9 December."))
    distill.distill(home, channel, client)
    talk(
        home,
        channel,
        (alex, "Change of plan: the plumber comes on Thursday 11 December, not Tuesday."),
    )
    result = distill.distill(home, channel, client)
    changed = len(changing) == 3
    assert ("the plumber comes on Tuesday 9 December." in result.memory.texts) is not changed
    assert len(result.memory.earlier) == changed
    asked = [r["messages"][0]["content"] for r in llm.requests if step_of(r) == "change"]
    first_kept = next((n for n in range(3) if n not in changing), 2)
    # asked until a look keeps it (an unusable answer is asked for once more)
    assert list(dict.fromkeys(asked)) == list(steps.LOOKS[: first_kept + 1])
    refused = last_refused(home)
    if not changed and first_kept:  # kept after a look changed it: the refusals say why
        assert f"kept: {first_kept} of the model's {first_kept + 1} looks changed it" in refused
        why = {"a copy": "Tuesday 9 December", "no JSON": "an answer about it that was unusable"}
        assert why[answers] in refused
    elif not changed:  # the judge kept it: its answer, or an unusable one (said)
        assert ("kept: 0 of the model's 1 looks" in refused) is (answers == "no JSON")


def test_a_persons_decision_stays_when_the_model_says_nothing_changes_it(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, _ = kitchen
    memory.save(home, channel, Memory("", [Decision("The worktops are oak", by=HAND)]), "hand")
    talk(home, channel, (sam, "We decided: the cabinet handles are oak too."))
    llm.default = step_answer
    result = distill.distill(home, channel, client)
    # "oak" is shared, but the message does not name the person's decision: not even asked
    assert "change" not in steps_asked(llm)
    assert result.memory.texts == [
        "The worktops are oak",
        "We decided: the cabinet handles are oak too.",
    ]
    assert result.memory.earlier == []


def test_a_quote_is_the_persons_own_message_by_number(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, _ = kitchen
    said = talk(
        home,
        channel,
        (sam, "If it's not oak, it's not our kitchen."),
        (None, "If it's not oak, I'd wait."),
    )
    llm.default = lambda r: (
        json.dumps({"quotes": [said[1].id, 999, said[0].id, said[0].id]})
        if step_of(r) == "quotes"
        else step_answer(r)
    )
    result = distill.distill(home, channel, client)
    quotes = [r for r in llm.requests if step_of(r) == "quotes"]
    assert "Charlie" not in str(quotes[0]["messages"][1]["content"])  # only people's offered
    assert [(q.speaker, q.text) for q in result.memory.quotes] == [
        ("sam", "If it's not oak, it's not our kitchen.")
    ]


def test_an_unusable_step_gets_one_repair_then_the_memory_stays(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, _ = kitchen
    talk(home, channel, (sam, "We decided: oak."))
    answers: list[str] = ['{"decision": "maybe"}', "no json here"]

    def model(request: dict[str, Any]) -> str:
        return (
            answers.pop(0) if step_of(request) == "decision" and answers else step_answer(request)
        )

    llm.default = model
    with pytest.raises(DistillationError, match="decision step was not valid twice"):
        distill.distill(home, channel, client)
    assert "was not usable" in str(llm.requests[1]["messages"][-1]["content"])
    assert memory.load(home, channel).decisions == []
    row = home.db.execute("SELECT status FROM distillations ORDER BY id DESC").fetchone()
    assert row["status"] == "failed"
    assert conversations.distilled_upto(home, channel) == 0  # the message is still pending

    llm.requests.clear()
    answers[:] = ['{"what": "oak"}']  # once wrong (no "decision"), then fine
    result = distill.distill(home, channel, client)
    assert result.attempts == 2
    assert result.memory.texts == ["oak."]


def test_a_decision_worded_without_its_value_is_the_message_itself(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, _ = kitchen
    talk(home, channel, (sam, "OK, the car goes in for repair on Friday 5 March."))
    llm.default = lambda r: (
        '{"kind": "settles something", "what": "The car repair schedule"}'
        if step_of(r) == "decision"
        else step_answer(r)
    )
    assert distill.distill(home, channel, client).memory.texts == [
        "OK, the car goes in for repair on Friday 5 March."
    ]


def test_a_summary_cut_by_the_answer_cap_keeps_its_whole_sentences(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, _ = kitchen
    talk(home, channel, (sam, "Nice weather."))
    cut = '{\n "summary": "Sam talks about the weather. The kitchen waits for the plumb'
    llm.default = lambda r: cut if step_of(r) == "summary" else step_answer(r)
    result = distill.distill(home, channel, client)
    assert result.memory.summary == "Sam talks about the weather."
    summary = next(r for r in llm.requests if step_of(r) == "summary")
    assert summary["max_tokens"] == steps.STEP_TOKENS["_Summary"]  # each step is capped


def test_a_decision_left_unworded_is_the_message_itself(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, _ = kitchen
    talk(home, channel, (sam, "Right. Oak it is, for the worktops. " + "And more. " * 30))
    llm.default = lambda r: (
        '{"kind": "settles something", "what": " "}' if step_of(r) == "decision" else step_answer(r)
    )
    (decision,) = distill.distill(home, channel, client).memory.texts
    assert decision.startswith("Right. Oak it is, for the worktops.") and len(decision) <= 200


def test_a_placeholder_summary_is_asked_again_with_the_reason(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, _ = kitchen
    talk(home, channel, (sam, "Nice weather."))
    summaries = ['{"summary": "..."}', '{"summary": "Talk about the kitchen."}']
    llm.default = lambda r: summaries.pop(0) if step_of(r) == "summary" else step_answer(r)
    result = distill.distill(home, channel, client)
    repair = [r for r in llm.requests if step_of(r) == "summary"][1]
    assert "empty or a placeholder" in str(repair["messages"][-1]["content"])
    assert result.memory.summary == "Talk about the kitchen."


def test_steps_work_with_a_server_that_refuses_response_format(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, _ = kitchen
    llm.refuse_response_format = True
    talk(home, channel, (sam, "Let's go with green metro tiles."))
    llm.default = lambda r: "Sure:\n" + step_answer(r)
    result = distill.distill(home, channel, client)
    assert not result.structured
    assert result.memory.texts == ["green metro tiles."]
    assert "response_format" in llm.requests[0]
    assert all("response_format" not in r for r in llm.requests[1:])


def test_auto_distills_in_steps_when_tools_are_constrained(
    home: Home, llm: ScriptedLLMServer, client: LLMClient
) -> None:
    channel = shared_channel(home, create_project(home, "Garden", distill_every=1000))
    sam = ensure_user(home.db, "sam")
    assert distill.method(home, channel, client) == (
        "whole",
        "auto: tools are native for this model",
    )
    talk(home, channel, (sam, "Let's go with a Bramley apple tree."))
    llm.default = lambda r: distill_answer() if is_distillation(r) else step_answer(r)
    assert distill.distill(home, channel, client).method == "whole"

    channel = shared_channel(home, update_project(home, "garden", tool_mode="constrained"))
    how, why = distill.method(home, channel, client)
    assert how == "steps" and "tools are constrained" in why
    talk(home, channel, (sam, "We decided: the shed gets a green roof."))
    assert distill.distill(home, channel, client).method == "steps"

    home.settings.distill_mode = "whole"  # the setting, and the project's own over it
    assert distill.method(home, channel, client)[0] == "whole"
    channel = shared_channel(home, update_project(home, "garden", distill_mode="steps"))
    assert distill.method(home, channel, client) == ("steps", "distill_mode = steps (set)")


def test_a_decision_worded_without_its_numbers_or_with_words_nobody_said_is_the_message(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, alex = kitchen
    talk(
        home,
        channel,
        (sam, "Change of plan: the plumber comes on Thursday 11 December."),
        (alex, "Let's go with Bea's quote for the tiling, she starts Monday."),
        (sam, "We decided: the bins go out on Tuesdays."),
    )
    answers = [
        '{"kind": "settles something", "what": "The plumber moved to Thursday"}',  # lost "11"
        '{"kind": "settles something", "what": "Charlie chose the cheapest tiler"}',  # made up
        '{"kind": "settles something", "what": "The bins go out on Tuesdays."}',  # true
    ]
    llm.default = lambda r: answers.pop(0) if step_of(r) == "decision" else step_answer(r)
    result = distill.distill(home, channel, client)
    assert result.memory.texts == [
        "Change of plan: the plumber comes on Thursday 11 December.",
        "Let's go with Bea's quote for the tiling, she starts Monday.",
        "The bins go out on Tuesdays.",
    ]
    assert len([r for r in llm.requests if step_of(r) == "decision"]) == 3  # asked once each


def test_a_reply_worded_without_its_ordinals_is_the_reply_itself(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, alex = kitchen
    talk(
        home,
        channel,
        (alex, "Shall we take turns hosting Sunday lunch?"),
        (sam, "Yes, first Sundays mine, third Sundays yours."),
        (alex, "Which campsite, Trevarrow or Polzeath?"),
        (sam, "The first one, definitely."),
    )
    answers = [
        '{"kind": "settles something", "what": "The Sunday lunches"}',  # lost "first", "third"
        '{"kind": "settles something", "what": "The first campsite, Trevarrow"}',  # kept "first"
    ]
    llm.default = lambda r: answers.pop(0) if step_of(r) == "decision" else step_answer(r)
    result = distill.distill(home, channel, client)
    assert result.memory.texts == [
        "Yes, first Sundays mine, third Sundays yours.",
        "The first campsite, Trevarrow",
    ]


def test_a_run_on_summary_cut_by_the_cap_keeps_its_clauses(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, _ = kitchen
    talk(home, channel, (sam, "Nice weather."))
    cut = '{"summary": "Sam likes the weather, the kitchen waits for the plumber, and the tiles'
    llm.default = lambda r: cut if step_of(r) == "summary" else step_answer(r)
    result = distill.distill(home, channel, client)
    assert result.memory.summary == "Sam likes the weather, the kitchen waits for the plumber…"


def test_decisions_told_alike_are_not_taken_for_the_same_thing(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, _ = kitchen
    llm.default = lambda r: (
        json.dumps({"kind": steps.SETTLES, "what": f"sam decided {judged(r).split(': ', 1)[1]}"})
        if step_of(r) == "decision"
        else step_answer(r)
    )
    talk(home, channel, (sam, "We decided: on Lisbon for the spring trip."))
    distill.distill(home, channel, client)
    llm.requests.clear()
    talk(home, channel, (sam, "We decided: to fly from Bristol."))
    result = distill.distill(home, channel, client)
    # "sam" and "decided" say who and how, not what: no change is even asked about
    assert "change" not in steps_asked(llm)
    assert result.memory.texts == [
        "We decided: on Lisbon for the spring trip.",
        "sam decided to fly from Bristol.",
    ]


def test_the_first_message_of_a_batch_is_judged_with_the_question_asked_before_it(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, alex = kitchen
    talk(home, channel, (sam, "We decided: the bins go out on Tuesdays."))
    talk(home, channel, (alex, "Oak or walnut for the worktops?"))
    llm.default = step_answer
    distill.distill(home, channel, client)  # the question is distilled with the first batch
    llm.requests.clear()
    talk(home, channel, (sam, "Oak, no question."), (alex, "Lovely."))
    distill.distill(home, channel, client)
    asked = [str(r["messages"][1]["content"]) for r in llm.requests if step_of(r) == "decision"]
    assert asked[0] == (
        "Just before (context only):\n"
        "sam: We decided: the bins go out on Tuesdays.\n"
        "alex: Oak or walnut for the worktops?\n\n"
        "The message:\nsam: Oak, no question."
    )
    assert len(asked) == 2  # the earlier messages are context, never judged again


def test_charlies_answers_do_not_crowd_the_peoples_messages_out_of_the_context(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    """Charlie answers every message: two messages back would show one person's. The
    context reaches back to the second person's message, Charlie's answers among them —
    across batches too."""
    channel, sam, alex = kitchen
    talk(home, channel, (sam, "We decided: the bins go out on Tuesdays."), (None, "Noted."))
    talk(home, channel, (alex, "Oak or walnut for the worktops?"), (None, "Both wear well."))
    llm.default = step_answer
    distill.distill(home, channel, client)
    llm.requests.clear()
    talk(home, channel, (sam, "Oak, no question."), (None, "Oak it is."), (alex, "Lovely."))
    distill.distill(home, channel, client)
    asked = [str(r["messages"][1]["content"]) for r in llm.requests if step_of(r) == "decision"]
    assert asked == [
        "Just before (context only):\n"
        "sam: We decided: the bins go out on Tuesdays.\n"
        "Charlie: Noted.\n"
        "alex: Oak or walnut for the worktops?\n"
        "Charlie: Both wear well.\n\n"
        "The message:\nsam: Oak, no question.",
        "Just before (context only):\n"
        "alex: Oak or walnut for the worktops?\n"
        "Charlie: Both wear well.\n"
        "sam: Oak, no question.\n"
        "Charlie: Oak it is.\n\n"
        "The message:\nalex: Lovely.",
    ]


def kinds_of(said: dict[str, tuple[str, str]]) -> Any:
    """A model that answers the decision step from `said` (message → kind, what)."""

    def answer(request: dict[str, Any]) -> str:
        if step_of(request) != "decision":
            return step_answer(request)
        kind, what = said[judged(request)]
        return json.dumps({"kind": kind, "what": what})

    return answer


AGREEING = {
    "We're capping it at 90 guests. Hard cap.": (steps.SETTLES, "90 guests, a hard cap"),
    "Mom will survive.": (steps.SETTLES, "the hard cap on the guest count"),
    "yes pls": (steps.SETTLES, "a reminder for the deposit on Friday"),
    "How about nothing over 400 pages": (steps.IDEA, ""),
    "seconded": (steps.SETTLES, "nothing over 400 pages"),
    "Sunday it is.": (steps.SETTLES, "the fair is on Sunday"),
    "We leave Friday the 24th, first thing.": (steps.SETTLES, "the departure"),
    "Campsite: I like Trevarrow Farm near St Ives, right by the beach.": (
        steps.SETTLES,
        "the campsite is Trevarrow Farm near St Ives",
    ),
    "Trevarrow is lovely, let's go there.": (steps.SETTLES, "Going to Trevarrow"),
    "Lovely, and we take the gazebo.": (steps.SETTLES, "they take the gazebo to Trevarrow"),
    "Trevarrow, yes, on the 9th.": (steps.SETTLES, "Trevarrow Farm from the 9th"),
}


def test_agreeing_with_a_decision_already_stated_settles_nothing_new(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    """ "Mom will survive." after the cap: the model's sentence takes nothing from the
    message — it only agrees, with something already settled. The same across batches."""
    channel, sam, alex = kitchen
    said = talk(home, channel, (sam, "We're capping it at 90 guests. Hard cap."))
    talk(home, channel, (alex, "Mom will survive."))
    llm.default = kinds_of(AGREEING)
    result = distill.distill(home, channel, client)
    assert [(d.text, d.sources) for d in result.memory.decisions] == [
        ("We're capping it at 90 guests. Hard cap.", (said[0].id,))
    ]
    talk(home, channel, (sam, "Mom will survive."))  # the next batch: the cap is held
    assert distill.distill(home, channel, client).memory.texts == [
        "We're capping it at 90 guests. Hard cap."
    ]
    # a day of its own is no agreement, however the model worded it
    talk(home, channel, (alex, "We leave Friday the 24th, first thing."))
    assert distill.distill(home, channel, client).memory.texts == [
        "We're capping it at 90 guests. Hard cap.",
        "We leave Friday the 24th, first thing.",
    ]


def test_accepting_the_assistants_offer_is_no_decision_of_the_household(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, _ = kitchen
    talk(
        home, channel, (None, "Shall I add a reminder for the deposit on Friday?"), (sam, "yes pls")
    )
    llm.default = kinds_of(AGREEING)
    assert distill.distill(home, channel, client).memory.texts == []


ENTRY = "Entry is free but we'll ask for a £1 donation for the food bank. Everyone okay?"
REPLIES = {
    ENTRY: (steps.SETTLES, "a £1 donation for the food bank"),  # never asked: it asks
    "Sounds good to me.": (steps.SETTLES, "Entry is free, with a £1 donation for the food bank"),
    "yes pls": (steps.SETTLES, "a £1 donation for the food bank"),
}


@pytest.mark.parametrize(
    ("reply", "held"),
    [
        ("Sounds good to me. Can you ask Maggie about the urn?", True),
        ("Yes! Or shall we ask £2 instead?", False),  # a question with a value of its own
        ("Can you ask Maggie about the urn? Sounds good to me.", False),  # it opens asking
    ],
)
def test_a_reply_that_agrees_then_asks_settles_the_proposal_over_charlies_answer(
    home: Home,
    llm: ScriptedLLMServer,
    client: LLMClient,
    kitchen: tuple[Channel, User, User],
    reply: str,
    held: bool,
) -> None:
    """As in a conversation nobody tuned on: the proposal asks if everyone is okay with it,
    Charlie answers it (as it answers every message), and the reply agrees, then asks
    something of its own. The reply answers the proposal, two messages up; its question
    takes nothing back. The reply is judged by what it answers, before the question."""
    channel, sam, alex = kitchen
    said = talk(home, channel, (sam, ENTRY), (None, "That sounds fair."), (alex, reply))
    llm.default = kinds_of(REPLIES)
    result = distill.distill(home, channel, client)
    worded = "Entry is free, with a £1 donation for the food bank"
    assert [(d.text, d.sources) for d in result.memory.decisions] == (
        [(worded, (said[2].id,))] if held else []
    )
    asked = [judged(r) for r in llm.requests if step_of(r) == "decision"]
    assert asked == (["Sounds good to me."] if held else [])


def test_a_reply_to_ones_own_proposal_across_charlies_question_answers_charlie(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, _ = kitchen
    asking = "Shall I note the £1 donation for the food bank?"
    talk(home, channel, (sam, ENTRY), (None, asking), (sam, "yes pls"))
    llm.default = kinds_of(REPLIES)
    assert distill.distill(home, channel, client).memory.texts == []


def test_agreeing_with_an_idea_settles_it_even_when_the_idea_came_in_the_batch_before(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, alex = kitchen
    talk(home, channel, (sam, "How about nothing over 400 pages"), (alex, "seconded"))
    llm.default = kinds_of(AGREEING)
    assert distill.distill(home, channel, client).memory.texts == ["nothing over 400 pages"]

    create_project(home, "Book club", distill_every=1000)
    other = shared_channel(home, update_project(home, "book-club", distill_mode="steps"))
    memory.ensure_file(home, other)
    talk(home, other, (sam, "How about nothing over 400 pages"))
    distill.distill(home, other, client)
    llm.requests.clear()
    said = talk(home, other, (alex, "seconded"), (sam, "Sunday it is."))
    result = distill.distill(home, other, client)
    asked = [judged(r) for r in llm.requests if step_of(r) == "decision"]
    # the idea, from the batch before, is asked about once more: what "seconded" agrees with
    assert asked == ["seconded", "How about nothing over 400 pages", "Sunday it is."]
    assert [(d.text, d.sources) for d in result.memory.decisions] == [
        ("nothing over 400 pages", (said[0].id,)),
        ("Sunday it is.", (said[1].id,)),
    ]


def test_a_reply_that_agrees_adding_nothing_is_the_same_decision_not_a_second_line(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    """Two lines for one decision (the proposal, and the model's sentence for the reply that
    agrees) would make a later change find one and leave the other saying the old place."""
    channel, sam, alex = kitchen
    proposal = "Campsite: I like Trevarrow Farm near St Ives, right by the beach."
    said = talk(home, channel, (sam, proposal), (alex, "Trevarrow is lovely, let's go there."))
    llm.default = kinds_of(AGREEING)
    result = distill.distill(home, channel, client)
    assert [(d.text, d.sources) for d in result.memory.decisions] == [
        (proposal, (said[0].id, said[1].id))
    ]
    asked = [(step_of(r), judged(r)) for r in llm.requests if step_of(r) != "decision"]
    assert asked[0] == ("change", "Trevarrow is lovely, let's go there.")  # the model agreed


def test_a_reply_the_model_reads_as_calling_the_proposal_off_keeps_its_own_line(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    """ "No, not Trevarrow." says no word the proposal did not: only the model, shown the two
    side by side, tells that it calls the proposal off rather than agreeing."""
    channel, sam, alex = kitchen
    proposal = "Campsite: I like Trevarrow Farm near St Ives, right by the beach."
    talk(home, channel, (sam, proposal), (alex, "No, not Trevarrow."))
    said = {**AGREEING, "No, not Trevarrow.": (steps.SETTLES, "Not going to Trevarrow")}

    def model(request: dict[str, Any]) -> str:
        if step_of(request) == "change":
            return json.dumps({"now": "No campsite chosen yet."})
        return str(kinds_of(said)(request))

    llm.default = model
    texts = [proposal, "Not going to Trevarrow"]
    assert distill.distill(home, channel, client).memory.texts == texts


def test_a_reply_with_a_word_or_a_value_of_its_own_states_its_own_decision(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    channel, sam, alex = kitchen
    proposal = "Campsite: I like Trevarrow Farm near St Ives, right by the beach."
    talk(home, channel, (sam, proposal), (alex, "Lovely, and we take the gazebo."))
    talk(home, channel, (sam, proposal), (alex, "Trevarrow, yes, on the 9th."))
    llm.default = kinds_of(AGREEING)
    assert distill.distill(home, channel, client).memory.texts == [
        proposal,
        "they take the gazebo to Trevarrow",
        "Trevarrow Farm from the 9th",
    ]


LITTER_PICK = "I've put us down for Saturday 14 March, 10am start at the bottom gate of the park."
LATER = "Bad news: the council moved the skip delivery, so we'll have to start at 11 instead of 10."


@pytest.mark.parametrize(
    ("rewrite", "held"),
    [  # the rewrite keeps the day and the place the message does not say: the whole plan
        ("Saturday 14 March, 11am start at the bottom gate of the park.", None),
        # … but not the time the message says goes ("instead of 10"): the message's line
        ("Saturday 14 March, 10am start, now 11am, at the bottom gate.", LATER),
        # … nor when it keeps nothing of the plan the line does not say
        ("Start at 11 at the bottom gate of the park.", LATER),
    ],
    ids=["whole plan", "old time kept", "nothing more"],
)
def test_a_change_keeps_the_rest_of_the_plan_it_changes(
    home: Home,
    llm: ScriptedLLMServer,
    client: LLMClient,
    kitchen: tuple[Channel, User, User],
    rewrite: str,
    held: str | None,
) -> None:
    """A message that moves one value of a plan ("start at 11 instead of 10") says nothing of
    its day or its place: held as the decision alone, the plan's day would be only under
    "Earlier decisions". The judge's rewrite of the plan with the new value is held instead,
    with the messages of both behind it — unless it keeps the value the message replaces."""
    channel, sam, alex = kitchen
    said = {LITTER_PICK: (steps.SETTLES, ""), LATER: (steps.SETTLES, "")}

    def model(request: dict[str, Any]) -> str:
        if step_of(request) == "change":
            return json.dumps({"now": rewrite})
        return str(kinds_of(said)(request))

    llm.default = model
    first = talk(home, channel, (sam, LITTER_PICK))
    distill.distill(home, channel, client)
    second = talk(home, channel, (alex, LATER))
    result = distill.distill(home, channel, client)
    (decision,) = result.memory.decisions
    assert decision.text == (held or rewrite)
    whole = (first[0].id, second[0].id)
    assert decision.sources == (whole if held is None else (second[0].id,))
    (was,) = result.memory.earlier
    assert was.text == LITTER_PICK and was.changed_by == second[0].id


ROUTE = "Route: up Church Street, round the green, finish at the Plough."
START = "Saturday the 19th, we start at 5pm so it's properly dark."
LATER_START = (
    "Bad news: the council says no singing on Church Street before 6. We'll have to start at 6."
)


def test_a_time_is_no_place_so_it_changes_the_start_not_the_route(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    """The real model, asked first about the route the message shares "street" with,
    rewrote its "finish at the Plough" as "finish at 6", every look agreeing; one message
    changes one decision, so the start stayed at 5pm and the route was gone. A value in
    place of what a decision holding no value is about changes nothing: the start is asked
    about next, and changed."""
    channel, sam, alex = kitchen
    said = {text: (steps.SETTLES, "") for text in (ROUTE, START, LATER_START)}
    rewrites = {
        ROUTE: "Route: up Church Street, round the green, finish at 6.",
        START: "Saturday the 19th, we start at 6pm so it's properly dark.",
    }

    def model(request: dict[str, Any]) -> str:
        if step_of(request) == "change":
            return json.dumps({"now": rewrites[earlier(request)]})
        return str(kinds_of(said)(request))

    llm.default = model
    first = talk(home, channel, (sam, START), (alex, ROUTE))
    distill.distill(home, channel, client)
    later = talk(home, channel, (alex, LATER_START))
    result = distill.distill(home, channel, client)
    asked = [earlier(r) for r in llm.requests if step_of(r) == "change" and not is_recheck(r)]
    assert asked == [ROUTE, START]  # the route first, as the model was asked
    assert result.memory.texts == [ROUTE, rewrites[START]]
    assert result.memory.decisions[1].sources == (first[0].id, later[0].id)
    assert [(e.text, e.changed_by) for e in result.memory.earlier] == [(START, later[0].id)]
    refused = last_refused(home)
    assert "puts a value where plough was, in a decision that held no value" in refused


FARM = "Campsite: I like Trevarrow Farm near St Ives, right by the beach."
AGREED = "Trevarrow is lovely, let's go there."
PITCH_FEE = "The pitch fee is £30 a night, paid on arrival."
FULL = (
    "Trevarrow emailed: they're full that week. Porthmeor Camping two miles on has space, "
    "so we've got a pitch there instead."
)


def test_a_message_changes_one_thing_though_two_lines_hold_it(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User, User]
) -> None:
    """The campsite was held twice, as the suggestion and as the agreement to it; the news
    that it is full changes both — the second holds what the first change took out
    ("trevarrow"). The pitch fee, which the message also touches and a careless model
    rewrites too, holds nothing of it: one message changes one thing, and that is logged."""
    channel, sam, alex = kitchen
    said = {text: (steps.SETTLES, "") for text in (FARM, AGREED, PITCH_FEE, FULL)}
    rewrites = {
        FARM: "Campsite: Porthmeor Camping, two miles on from St Ives.",
        AGREED: "Porthmeor Camping is lovely, let's go there.",
        PITCH_FEE: "The pitch fee at Porthmeor Camping is £30 a night, paid on arrival.",
    }

    def model(request: dict[str, Any]) -> str:
        if step_of(request) == "change":
            return json.dumps({"now": rewrites[earlier(request)]})
        return str(kinds_of(said)(request))

    llm.default = model
    talk(home, channel, (sam, FARM), (alex, AGREED), (sam, PITCH_FEE))
    distill.distill(home, channel, client)
    (full,) = talk(home, channel, (alex, FULL))
    result = distill.distill(home, channel, client)
    assert result.memory.texts == [PITCH_FEE, FULL]
    assert sorted((e.text, e.changed_by) for e in result.memory.earlier) == [
        (FARM, full.id),
        (AGREED, full.id),
    ]
    assert "one message changes one decision at a time" in last_refused(home)
