"""The household of benchmarks/household_tasks.py: notes, a memory, and two months of talk.

One shared project, "house": 40 notes, a memory.md with a summary and decisions, and 560
earlier messages between Sam, Alex and Charlie, dated from September to late November 2026.
Facts are planted where each task needs them: in a note only, in an early message only
(ten or more messages back, out of any recent context), or in the memory. Together they
hold about 13,000 tokens — more than an 8,192-token window — so pasting everything must
leave some out (the oldest), and the facts asked about are spread over the whole time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

NOTES: list[tuple[str, str, str]] = [  # (title, body, the day it was written)
    (
        "Plumber",
        "Dave Rossi of Rossi Plumbing, phone 07700 900123. He comes on Thursday 11 December "
        "at 8am to move the sink pipes and fit the new tap. He charges £65 an hour and quoted "
        "£420 for the whole job, parts included. Park in the drive; he needs the water off.",
        "2026-09-23",
    ),
    (
        "Worktops",
        "Solid oak worktops from Howdens, 38 mm thick, a 3 m run plus the island end. Oil them "
        "with Osmo Top Oil every spring, two thin coats. Cost £780 delivered. Keep hot pans "
        "off them: use the trivet.",
        "2026-10-30",
    ),
    (
        "Splashback tiles",
        "Fired Earth metro tiles in 'Moss' green, 7.5 x 15 cm, about 4 square metres with "
        "spares. Grout colour: Pewter. Laid in a straight brick bond, not herringbone.",
        "2026-10-25",
    ),
    (
        "Boiler",
        "Worcester Bosch Greenstar 30i, fitted in 2019. Serviced every October by HeatRight; "
        "the next service is booked for October 2027. The warranty runs until March 2029, "
        "but only if the yearly service is kept.",
        "2026-11-10",
    ),
    (
        "Kitchen budget",
        "Budget £18,000 in all. Spent so far £11,250: cabinets £6,400, worktops £780, "
        "electrics £1,900, plumbing deposit £200, skip and sundries £1,970.",
        "2026-11-04",
    ),
    (
        "Electrician",
        "Priya Shah of Bright Spark Electrics rewired the kitchen ring main on 14 November. "
        "The safety certificate number is BS-44817; a copy is in the blue folder.",
        "2026-09-17",
    ),
    (
        "Paint",
        "Walls: Farrow & Ball Skimming Stone No. 241 in estate emulsion. Ceiling: brilliant "
        "white. Three tins are left in the garage, on the top shelf.",
        "2026-10-03",
    ),
    (
        "Appliances",
        "Oven: Bosch Serie 6, ordered 20 November, arriving on 9 December. Hob: a Neff "
        "induction hob, still to choose the model. The fridge stays where it is.",
        "2026-09-02",
    ),
    (
        "Bins",
        "The blue recycling bin goes out every other Tuesday. General waste every Friday. "
        "Garden waste on the first Monday of the month.",
        "2026-09-07",
    ),
    (
        "Wi-Fi",
        "The network is called Maple House. The router password is orchid-lantern-42; the "
        "guest network password is on the fridge.",
        "2026-11-20",
    ),
    (
        "School",
        "Mia goes to Harbour Primary; her teacher is Ms Okafor. Pickup is at 3:15pm, PE is on "
        "Wednesdays, and the school office number is 01632 960123.",
        "2026-11-15",
    ),
    (
        "Car",
        "Skoda Octavia estate. The MOT is due on 3 March 2027. Tyres are 205/55 R16. Insured "
        "with Direct Line, policy DL-2281934, renewal in August.",
        "2026-09-28",
    ),
    (
        "Garden",
        "The hedge is trimmed in April and September. The apple tree is a Bramley. Lawn seed: "
        "Johnsons Quick Lawn, one box per patch.",
        "2026-09-12",
    ),
    (
        "Dentist",
        "Dr Patel at Smile Studio, phone 01632 960555. Check-ups for everyone on 12 January "
        "2027, at 4pm.",
        "2026-10-14",
    ),
    (
        "Neighbours",
        "Tom and Jess at number 14 keep our spare key. Mrs Hughes at number 10 feeds the cat, "
        "Biscuit, when we are away.",
        "2026-10-19",
    ),
    (
        "Cabinets",
        "Shaker cabinets in dusty blue from Howdens, 12 units. The fitter is Marek Nowak; "
        "handles still to choose.",
        "2026-10-09",
    ),
]

# More of what a household keeps, so that everything together outgrows a small window.
_TOPICS = [
    (
        "Lasagne recipe",
        "oven at 190C, layers of ragu, bechamel and pasta sheets, rest it before cutting",
    ),
    (
        "Sourdough starter",
        "feed it with rye flour and water at the same weight, keep it in the fridge",
    ),
    ("Washing machine", "the filter is behind the small door at the bottom left, clean it monthly"),
    ("Dishwasher", "salt in the left compartment, rinse aid on the door, eco programme at night"),
    ("Smoke alarms", "test every month with the button, batteries changed each new year"),
    ("Christmas list", "board games, warm socks, a jigsaw, chocolate oranges and a new kettle"),
    ("Holiday ideas", "a cottage in Wales, the Lake District, or a week by the sea in Cornwall"),
    ("Shopping staples", "oat milk, eggs, rice, tinned tomatoes, onions, coffee and dish soap"),
    ("Bike maintenance", "pump the tyres weekly, oil the chain monthly, check the brake pads"),
    ("Houseplants", "water the fern twice a week, the cactus once a month, mist the orchid"),
    ("Cleaning rota", "bathrooms on Saturday, floors on Sunday, fridge every other week"),
    ("Birthday party ideas", "a treasure hunt in the garden, pizza, and a cake shaped like a cat"),
    ("Gutter cleaning", "clear the leaves in November and check the downpipes after storms"),
    (
        "Loft storage",
        "suitcases on the left, decorations in the red boxes, baby clothes at the back",
    ),
    ("Energy meter", "read the meter on the first of the month and send it through the app"),
    ("Fire pit", "only dry wood, keep the bucket of sand nearby, never leave it burning"),
    ("Piano lessons", "practice twenty minutes a day, scales first, then the current piece"),
    ("Camping kit", "tent, two sleeping bags, the stove, gas, head torches and the first aid kit"),
    ("Bread machine", "basic white on programme one, wholemeal on programme three, two hours"),
    ("Winter car kit", "ice scraper, de-icer, a blanket, a torch, jump leads and a shovel"),
    ("Coffee machine", "descale every two months with the tablets, empty the drip tray daily"),
    ("Board games", "Ticket to Ride for four, Carcassonne for two, Dobble for quick rounds"),
    ("Allotment", "potatoes in bed one, beans in bed two, the shed key is under the pot"),
    ("Running plan", "three runs a week, one long run on Sunday, rest after hard days"),
]


def _filler_notes() -> list[tuple[str, str, str]]:
    notes = []
    for number, (title, gist) in enumerate(_TOPICS):
        body = (
            f"{gist.capitalize()}. We wrote this down so nobody has to remember it. "
            f"Ask whoever last did it if something seems off; {gist}. "
            "Update this note when anything changes, and say so in the chat."
        )
        day = (date(2026, 9, 1) + timedelta(days=number * 3 + 1)).isoformat()  # Sep to Nov
        notes.append((title, body, day))
    return notes


NOTES += _filler_notes()

MEMORY = """# Memory

## Summary
Sam and Alex are renovating their kitchen: new Shaker cabinets, oak worktops, a green
tiled splashback and new appliances, with the plumber and the cabinet fitter booked for
December. Charlie keeps track of the trades, the budget and what was decided.

## Decisions
- The kitchen budget is £18,000 in all.
- The worktops are solid oak from Howdens.
- The splashback is green metro tiles, laid in a straight brick bond.
- The fridge stays.

## Recent quotes
- Sam: "If it's not oak, it's not our kitchen."
"""

# The earlier conversation: (speaker, text). Charlie's replies are short; the people's
# messages hold what the recall tasks ask about, early on and far from the end.
_PLANTED: list[tuple[str, str]] = [
    ("Sam", "I booked the skip for 2 December, it's from Skip-It and costs £240."),
    ("Charlie", "Noted: a skip from Skip-It on 2 December, £240."),
    ("Alex", "My mum's birthday is on 19 December and she wants a cast-iron pan this year."),
    ("Charlie", "A cast-iron pan for your mum's birthday on 19 December, noted."),
    ("Sam", "Marek, the cabinet fitter, says he needs two days, starting on the 15th."),
    ("Charlie", "Two days for the cabinets, from the 15th."),
    ("Alex", "I'll handle the council permit. The reference is PL-2026-0917."),
    ("Charlie", "Alex handles the permit, reference PL-2026-0917."),
    ("Sam", "Tom at number 14 wants our old sink for his workshop, so it goes to him."),
    ("Charlie", "The old sink goes to Tom."),
    ("Alex", "We keep the old pine table, it can live in the garden shed."),
    ("Charlie", "The pine table goes to the shed."),
    ("Sam", "Remember Mia is allergic to cashews, so no cashew snacks for the builders' tea."),
    ("Charlie", "No cashews: Mia is allergic."),
    ("Alex", "My brother Leo is visiting from the 27th to the 29th of December."),
    ("Charlie", "Leo visits 27 to 29 December."),
]
_SUBJECTS = [
    "the dust",
    "the builders",
    "the weather",
    "Mia's homework",
    "the cat",
    "dinner",
    "the car",
    "the garden",
    "the washing",
    "the shopping",
    "the neighbours",
    "the post",
]
_REMARKS = [
    "is driving me mad today",
    "was better than expected",
    "needs sorting this week",
    "came up at breakfast",
    "can wait until the weekend",
    "made everyone laugh",
]
_WHEN = ["this morning", "yesterday", "again", "at last"]
_FILLER = [
    ("Sam", "The dust is everywhere again, I hoovered twice today."),
    ("Charlie", "Dust sheets over the doorways help."),
    ("Alex", "Did anyone see the tape measure? It was on the windowsill."),
    ("Charlie", "It may be in the garage with the paint."),
    ("Sam", "We're eating takeaway again tonight, the microwave is in the hall."),
    ("Charlie", "Enjoy the takeaway."),
    ("Alex", "The weather is grim, the builders couldn't use the skip area."),
    ("Charlie", "Hopefully it clears by the weekend."),
    ("Sam", "Mia drew a picture of the new kitchen, it's very blue."),
    ("Charlie", "A lovely idea for the fridge door."),
    ("Alex", "I think the hallway light flickers, let's ask Priya next time."),
    ("Charlie", "Worth mentioning to the electrician."),
    ("Sam", "Biscuit hid under the stairs all day because of the drilling."),
    ("Charlie", "Cats hate drilling; a quiet room helps."),
    ("Alex", "I found the old receipts for the fridge in the drawer."),
    ("Charlie", "Good to keep them with the warranty papers."),
    ("Sam", "The bathroom tap drips a bit, not urgent."),
    ("Charlie", "Something to ask the plumber about while he's here."),
    ("Alex", "We should order more bin bags."),
    ("Charlie", "Added to the shopping thoughts."),
]


TRANSCRIPT = 560  # messages


def transcript() -> list[tuple[str, str, str]]:
    """(speaker, text, day): 560 messages over 1 September – 27 November 2026, oldest first,
    each planted exchange at its own place along them (the first near the start, the last
    near the end): pasting the newest that fit a window keeps some and loses others."""
    chatter = [
        ("Sam" if i % 2 else "Alex", f"{when.capitalize()}, {subject} {remark}.")
        for i, (when, subject, remark) in enumerate(
            (w, s, r) for w in _WHEN for r in _REMARKS for s in _SUBJECTS
        )
    ]
    fillers = iter([m for pair in zip(_FILLER * 40, chatter * 2, strict=False) for m in pair])
    pairs = [_PLANTED[at : at + 2] for at in range(0, len(_PLANTED), 2)]
    gap = TRANSCRIPT // len(pairs)
    messages: list[tuple[str, str]] = []
    for pair in pairs:
        messages += [next(fillers) for _ in range(gap // 2 - 1)] + pair
        messages += [next(fillers) for _ in range(gap - gap // 2 - 1)]
    messages += [next(fillers) for _ in range(TRANSCRIPT - len(messages))]
    first = date(2026, 9, 1)
    step = (date(2026, 11, 27) - first).days / len(messages)
    return [
        (speaker, text, (first + timedelta(days=int(i * step))).isoformat())
        for i, (speaker, text) in enumerate(messages)
    ]


@dataclass(frozen=True)
class Task:
    """One question, what a right answer holds, and what would find it."""

    id: str
    kind: str  # note, recall, memory, decision, date, chat
    question: str
    expect: tuple[tuple[str, ...], ...]  # every group must match: one string of each
    note: str = ""  # the note key a right look-up finds
    said: str = ""  # words of the earlier message a right recall finds
    tool: str = ""  # the tool a right answer calls ("" none needed, "-" none allowed)
    decided: str = ""  # a decision task: what the memory's decisions must then hold


def _any(*options: str) -> tuple[str, ...]:
    return options


TASKS: list[Task] = [
    Task(
        "plumber-phone",
        "note",
        "What's the plumber's phone number?",
        (_any("07700 900123", "07700900123"),),
        "house/plumber",
    ),
    Task(
        "worktop-thickness", "note", "How thick are the worktops?", (_any("38"),), "house/worktops"
    ),
    Task(
        "grout",
        "note",
        "What colour grout did we pick for the splashback?",
        (_any("pewter"),),
        "house/splashback-tiles",
    ),
    Task(
        "boiler-service",
        "note",
        "When is the boiler's next service?",
        (_any("october 2027", "2027"),),
        "house/boiler",
    ),
    Task(
        "wifi",
        "note",
        "What is the wifi router password?",
        (_any("orchid-lantern-42"),),
        "house/wi-fi",
    ),
    Task(
        "mot",
        "note",
        "When is the car's MOT due?",
        (_any("3 march", "march 3", "2027-03-03"),),
        "house/car",
    ),
    Task("teacher", "note", "Who is Mia's teacher?", (_any("okafor"),), "house/school"),
    Task(
        "oven",
        "note",
        "When does the new oven arrive?",
        (_any("9 december", "december 9", "9th", "12-09"),),
        "house/appliances",
    ),
    Task(
        "bins",
        "note",
        "Which bin goes out every other Tuesday?",
        (_any("blue", "recycling"),),
        "house/bins",
    ),
    Task(
        "certificate",
        "note",
        "What is the electrician's certificate number?",
        (_any("bs-44817", "44817"),),
        "house/electrician",
    ),
    Task(
        "skip",
        "recall",
        "When is the skip coming, and who is it from?",
        (_any("2 december", "december 2", "2nd"), _any("skip-it", "skip it")),
        said="skip for 2 December",
    ),
    Task(
        "mum-present",
        "recall",
        "What does Alex's mum want for her birthday?",
        (_any("cast-iron", "cast iron"),),
        said="cast-iron pan",
    ),
    Task(
        "fitter-days",
        "recall",
        "How many days does Marek need to fit the cabinets?",
        (_any("two", "2 days"),),
        said="needs two days",
    ),
    Task(
        "permit",
        "recall",
        "What is the council permit reference?",
        (_any("pl-2026-0917"),),
        said="PL-2026-0917",
    ),
    Task("old-sink", "recall", "Who is getting our old sink?", (_any("tom"),), said="old sink"),
    Task(
        "pine-table",
        "recall",
        "What are we doing with the old pine table?",
        (_any("shed"),),
        said="pine table",
    ),
    Task(
        "allergy",
        "recall",
        "Which nut is Mia allergic to?",
        (_any("cashew"),),
        said="allergic to cashews",
    ),
    Task("leo", "recall", "When is Leo visiting?", (_any("27"),), said="Leo is visiting"),
    Task("budget", "memory", "What is our kitchen budget?", (_any("18,000", "18000", "18 000"),)),
    Task(
        "splashback", "memory", "What did we decide for the splashback?", (_any("green", "metro"),)
    ),
    Task(
        "floor",
        "decision",
        "We've decided the kitchen floor will be grey slate tiles. Please record that decision.",
        (),
        tool="record_decision",
        decided="slate",
    ),
    Task(
        "handles",
        "decision",
        "Let's go with brass handles on the cabinets. Record that as a decision.",
        (),
        tool="record_decision",
        decided="brass",
    ),
    Task(
        "collect-tiles",
        "decision",
        "Record a decision: Alex will collect the tiles on Saturday.",
        (),
        tool="record_decision",
        decided="saturday",
    ),
    Task(
        "hob",
        "decision",
        "Please record the decision that we chose a Neff induction hob.",
        (),
        tool="record_decision",
        decided="neff",
    ),
    Task(
        "days-to-christmas",
        "date",
        "How many days are there from 2026-12-01 to 2026-12-24?",
        (_any("23"),),
        tool="days_between",
    ),
    Task(
        "ten-days-later",
        "date",
        "What date is 10 days after 2026-12-25?",
        (_any("2027-01-04", "4 january", "january 4"),),
        tool="date_add",
    ),
    Task(
        "days-between",
        "date",
        "How many days are there between 2026-11-14 and 2026-12-11?",
        (_any("27"),),
        tool="days_between",
    ),
    Task(
        "three-weeks",
        "date",
        "What is the date 21 days after 2026-12-09?",
        (_any("2026-12-30", "30 december", "december 30"),),
        tool="date_add",
    ),
    Task("capital", "chat", "What is the capital of France?", (_any("paris"),), tool="-"),
    Task(
        "synonym",
        "chat",
        "Give me one synonym for 'happy'.",
        (
            _any(
                "glad",
                "joyful",
                "cheerful",
                "content",
                "delighted",
                "pleased",
                "elated",
                "merry",
                "joyous",
                "jolly",
            ),
        ),
        tool="-",
    ),
    Task(
        "thanks",
        "chat",
        "Write a one-sentence thank-you to the plumber.",
        (_any("thank"),),
        tool="-",
    ),
]
