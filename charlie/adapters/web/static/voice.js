// @ts-check
// Talking to Charlie: push-to-talk and hands-free, with the microphone (getUserMedia) and
// an audio worklet (voice-worklet.js) that turns it into 16 kHz 16-bit frames of 100 ms.
//
// Push-to-talk records while the mic button is held (or from one click to the next) and
// sends the recording as a spoken turn. Hands-free streams the frames to the server's
// listener (WS /api/voice/listen), whose voice detector — the one that trims uploads —
// says when speech starts and when the person has finished. The page then sends that stretch
// of what it streamed as a spoken turn, plays the answer and listens again; it never guesses
// the end of speech itself. While Charlie thinks and speaks nothing is streamed, so Charlie
// does not hear itself.

import { get } from './api.js';
import { $, h } from './dom.js';

const RATE = 16000;
const FRAME = RATE / 10; // samples per frame from the worklet: 100 ms
const PAD_SECONDS = 0.2; // kept either side of an utterance, as the server trims uploads
const HOLD_MS = 350; // a longer press is push-to-talk; a shorter one starts click-to-talk
const MAX_TALK_SECONDS = 60; // a push-to-talk recording is sent when it gets this long
const KEEP_SECONDS = 15; // kept beyond the longest utterance, so its start is still there
const EARLY_FRAMES = 50; // frames held while the listener gets ready (5 s)

const LABELS = {
  off: '',
  listening: 'Listening',
  hearing: 'Hearing you',
  thinking: 'Thinking',
  speaking: 'Speaking',
};

class MicError extends Error {}

function micProblem(error) {
  switch (error && error.name) {
    case 'NotAllowedError':
    case 'SecurityError':
      return (
        'Charlie may not use the microphone. Allow it for this site in the browser ' +
        '(the icon by the address), then try again.'
      );
    case 'NotFoundError':
    case 'OverconstrainedError':
      return 'No microphone was found. Connect one, then try again.';
    case 'NotReadableError':
    case 'AbortError':
      return 'The microphone could not be opened: another app may be using it.';
    default:
      return `The microphone could not be opened: ${(error && error.message) || error}`;
  }
}

/** Why this page can't record at all, or null. */
function recordingBlocked() {
  if (!window.isSecureContext) {
    return (
      'Browsers allow the microphone only on a secure page: open Charlie over HTTPS, ' +
      'or as localhost on this computer.'
    );
  }
  const media = navigator.mediaDevices;
  if (!media || !media.getUserMedia || !window.AudioWorkletNode) {
    return 'This browser cannot record audio for Charlie.';
  }
  return null;
}

/**
 * Open the microphone; `onFrame(Int16Array)` gets 100 ms of 16 kHz audio at a time.
 * Returns {flush, close}: `flush()` resolves to the samples of the unfinished frame.
 */
async function openMic(onFrame) {
  const blocked = recordingBlocked();
  if (blocked) throw new MicError(blocked);
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: true, noiseSuppression: true, channelCount: 1 },
    });
  } catch (error) {
    throw new MicError(micProblem(error));
  }
  const context = new AudioContext();
  let flushed = null;
  try {
    await context.audioWorklet.addModule('/voice-worklet.js');
    const source = context.createMediaStreamSource(stream);
    const node = new AudioWorkletNode(context, 'charlie-mic', {
      processorOptions: { rate: RATE, frame: FRAME },
    });
    node.port.onmessage = (event) => {
      if (event.data instanceof ArrayBuffer) onFrame(new Int16Array(event.data));
      else if (event.data && event.data.last && flushed) {
        flushed(new Int16Array(event.data.last));
        flushed = null;
      }
    };
    source.connect(node);
    node.connect(context.destination); // so the graph pulls it; it only outputs silence
    if (context.state === 'suspended') context.resume().catch(() => {});
    return {
      flush() {
        return new Promise((resolve) => {
          flushed = resolve;
          node.port.postMessage('flush');
        });
      },
      close() {
        for (const track of stream.getTracks()) track.stop();
        node.port.onmessage = null;
        source.disconnect();
        node.disconnect();
        context.close().catch(() => {});
        if (flushed) flushed(new Int16Array(0));
        flushed = null;
      },
    };
  } catch (error) {
    for (const track of stream.getTracks()) track.stop();
    context.close().catch(() => {});
    throw new MicError(`The microphone could not be opened: ${error.message}`);
  }
}

function joined(frames) {
  const out = new Int16Array(frames.reduce((n, f) => n + f.length, 0));
  let at = 0;
  for (const frame of frames) {
    out.set(frame, at);
    at += frame.length;
  }
  return out;
}

/**
 * Plays the spoken reply's sentences back to back as they arrive (each a base64 WAV).
 * `finished()` resolves when the last one scheduled has played.
 */
function createPlayer({ onStart, onProblem }) {
  let context = null;
  let chain = Promise.resolve();
  let nextAt = 0;
  let session = 0;
  const playing = new Set();
  let waiters = [];

  const settle = () => {
    if (playing.size) return;
    const done = waiters;
    waiters = [];
    for (const resolve of done) resolve();
  };

  const player = {
    /** Make the audio context from a click or key press, so the browser lets it play. */
    unlock() {
      if (!context) context = new AudioContext();
      if (context.state === 'suspended') context.resume().catch(() => {});
    },
    play(chunk) {
      const mine = session;
      chain = chain.then(async () => {
        if (mine !== session || !chunk.wav) return;
        player.unlock();
        const bytes = Uint8Array.from(atob(chunk.wav), (c) => c.charCodeAt(0));
        let buffer;
        try {
          buffer = await context.decodeAudioData(bytes.buffer);
        } catch (error) {
          onProblem(`A sentence of the spoken reply could not be played (${error.message}).`);
          return;
        }
        if (mine !== session) return;
        const source = context.createBufferSource();
        source.buffer = buffer;
        source.connect(context.destination);
        const at = Math.max(context.currentTime + 0.05, nextAt);
        nextAt = at + buffer.duration;
        source.onended = () => {
          playing.delete(source);
          settle();
        };
        playing.add(source);
        source.start(at);
        onStart();
      });
    },
    async finished() {
      await chain;
      if (!playing.size) return;
      // A context the browser keeps suspended never ends its sounds: don't wait forever.
      const left = Math.max(0, nextAt - context.currentTime) + 2;
      await new Promise((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, left * 1000);
      });
    },
    stop() {
      session += 1;
      for (const source of playing) {
        source.onended = null;
        source.stop();
      }
      playing.clear();
      nextAt = 0;
      settle();
    },
  };
  return player;
}

export function createVoice(app, chat) {
  const talkButton = $('#talk-button');
  const handsButton = $('#hands-free-button');
  const pill = $('#voice-state');
  const problemBox = $('#voice-problem');

  let status = null; // GET /api/voice
  let unusable = 'Voice is not available here.'; // why the buttons do nothing, or null
  let mode = 'off'; // 'off' | 'talk' | 'hands-free'
  let state = 'off'; // off | listening | hearing | thinking | speaking
  let run = 0; // bumps whenever a mode starts or stops, so late callbacks know they are stale
  let mic = null;

  const player = createPlayer({
    onStart() {
      if (mode !== 'off' && state === 'thinking') setState('speaking');
    },
    onProblem: showProblem,
  });

  // ------------------------------------------------------------ state shown

  function setState(next) {
    state = next;
    pill.dataset.voiceState = next;
    pill.hidden = next === 'off';
    let label = LABELS[next];
    if (next === 'listening' && mode === 'talk') {
      label = holding ? 'Listening · let go to send' : 'Listening · click again to send';
    }
    pill.textContent = label;
  }

  function showProblem(message) {
    problemBox.textContent = message;
    problemBox.hidden = false;
  }

  function hideProblem() {
    problemBox.hidden = true;
  }

  function press(button, pressed) {
    button.setAttribute('aria-pressed', String(pressed));
  }

  /** Ask the server whether voice works here; the buttons say why when it doesn't. */
  async function check() {
    try {
      status = await get('/api/voice');
    } catch (error) {
      status = null;
      talkButton.hidden = true;
      handsButton.hidden = true;
      if (error.status === 0) app.markOffline();
      return;
    }
    unusable = status.available
      ? recordingBlocked()
      : status.problem || 'Voice is not available on this server.';
    for (const button of [talkButton, handsButton]) {
      button.hidden = false;
      button.setAttribute('aria-disabled', String(Boolean(unusable)));
    }
    talkButton.title = unusable
      ? `Voice is off: ${unusable}`
      : 'Hold to talk, or click to start and click again to send';
    handsButton.title = unusable
      ? `Voice is off: ${unusable}`
      : 'Talk hands-free: Charlie listens, answers aloud, and listens again';
  }

  function usable() {
    if (!unusable) return true;
    showProblem(`Voice is off: ${unusable}`);
    return false;
  }

  // ------------------------------------------------------------ push-to-talk

  let holding = false; // the button is held down
  let pressedAt = 0;
  let stopOnUp = false; // the second click of click-to-talk
  let collecting = false; // frames go into `recording`
  let recording = [];
  let recorded = 0;
  let opening = Promise.resolve();

  function onTalkFrame(frame) {
    if (!collecting) return;
    recording.push(frame);
    recorded += frame.length;
    if (recorded >= MAX_TALK_SECONDS * RATE) finishTalk();
  }

  function startTalk() {
    if (mode !== 'off' || !usable()) return;
    hideProblem();
    player.stop();
    player.unlock();
    mode = 'talk';
    run += 1;
    const mine = run;
    recording = [];
    recorded = 0;
    collecting = true;
    press(talkButton, true);
    setState('listening');
    opening = openMic((frame) => {
      if (mine === run) onTalkFrame(frame);
    }).then(
      (opened) => {
        if (mine === run && mode === 'talk') mic = opened;
        else opened.close();
      },
      (error) => {
        if (mine !== run) return;
        endTalk();
        showProblem(error.message);
      },
    );
  }

  async function finishTalk() {
    if (mode !== 'talk' || state !== 'listening') return;
    const mine = run;
    setState('thinking');
    press(talkButton, false);
    await opening;
    if (mine !== run) return;
    const last = mic ? await mic.flush() : new Int16Array(0);
    collecting = false;
    closeMic();
    const pcm = joined([...recording, last]);
    recording = [];
    if (pcm.length < RATE / 2) {
      showProblem('Nothing was recorded: hold the button while you speak, then let go.');
      endTalk();
      return;
    }
    await spokenTurn(pcm, mine);
    if (mine === run) endTalk();
  }

  function endTalk() {
    run += 1;
    collecting = false;
    recording = [];
    closeMic();
    player.stop();
    mode = 'off';
    holding = false;
    stopOnUp = false;
    press(talkButton, false);
    setState('off');
  }

  talkButton.addEventListener('pointerdown', (event) => {
    if (event.button !== 0 || mode === 'hands-free') return;
    event.preventDefault(); // keep the focus where it is (the keyboard stays down on a phone)
    talkButton.setPointerCapture(event.pointerId);
    if (mode === 'talk') {
      if (state === 'listening') stopOnUp = true;
      else if (state === 'speaking') player.stop(); // cut the answer short
      return;
    }
    holding = true;
    pressedAt = performance.now();
    startTalk();
  });

  const release = () => {
    if (stopOnUp) {
      stopOnUp = false;
      finishTalk();
      return;
    }
    if (!holding) return;
    holding = false;
    if (performance.now() - pressedAt >= HOLD_MS) finishTalk();
    else if (mode === 'talk' && state === 'listening') setState('listening'); // click-to-talk
  };
  talkButton.addEventListener('pointerup', release);
  talkButton.addEventListener('pointercancel', release);
  talkButton.addEventListener('contextmenu', (event) => event.preventDefault());
  talkButton.addEventListener('click', (event) => {
    if (event.detail !== 0) return; // a pointer: handled above. This is Enter or Space.
    if (mode === 'talk') finishTalk();
    else if (mode === 'off') startTalk();
  });
  talkButton.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && mode === 'talk') endTalk();
  });

  // ------------------------------------------------------------ hands-free

  let socket = null;
  let ready = false; // the listener said `ready`
  let resets = 0; // our `reset`s the listener has not answered yet
  let early = []; // frames from before the listener was ready
  let frames = []; // what was streamed since the last reset (the oldest let go)
  let firstSample = 0; // the stream position of frames[0]
  let streamed = 0; // samples streamed since the last reset
  let lastError = '';

  function keep(frame) {
    frames.push(frame);
    streamed += frame.length;
    const limit = ((status && status.max_seconds) || 30) * RATE + KEEP_SECONDS * RATE;
    while (frames.length > 1 && streamed - firstSample - frames[0].length >= limit) {
      firstSample += frames[0].length;
      frames.shift();
    }
  }

  /** The samples streamed between two times (seconds since the last reset). */
  function between(start, end) {
    const from = Math.max(firstSample, Math.round(start * RATE));
    const to = Math.min(streamed, Math.round(end * RATE));
    const out = new Int16Array(Math.max(0, to - from));
    let at = firstSample;
    for (const frame of frames) {
      const lo = Math.max(from, at);
      const hi = Math.min(to, at + frame.length);
      if (hi > lo) out.set(frame.subarray(lo - at, hi - at), lo - from);
      at += frame.length;
    }
    return out;
  }

  function stream(frame) {
    socket.send(frame);
    keep(frame);
  }

  /** Both sides start counting from zero again. */
  function restart() {
    frames = [];
    firstSample = 0;
    streamed = 0;
    if (socket && socket.readyState === WebSocket.OPEN) {
      resets += 1;
      socket.send('reset');
    }
  }

  function onListeningFrame(frame) {
    // Thinking or speaking: nothing goes out, so Charlie does not hear itself.
    if (state !== 'listening' && state !== 'hearing') return;
    if (!ready) {
      early.push(frame);
      if (early.length > EARLY_FRAMES) early.shift();
      return;
    }
    stream(frame);
  }

  function onMessage(event) {
    if (typeof event.data !== 'string') return;
    let message;
    try {
      message = JSON.parse(event.data);
    } catch {
      return; // not ours to read
    }
    const listening = state === 'listening' || state === 'hearing';
    switch (message.event) {
      case 'ready':
        ready = true;
        for (const frame of early) stream(frame);
        early = [];
        break;
      case 'reset':
        if (resets > 0) resets -= 1;
        else if (listening) {
          // The listener started over by itself after a long quiet spell: start over together.
          restart();
          setState('listening');
        }
        break;
      case 'speech':
        if (!resets && state === 'listening') setState('hearing');
        break;
      case 'utterance':
        if (!resets && listening) handsFreeTurn(message.start, message.end);
        break;
      case 'error':
        lastError = message.error || '';
        break;
      default:
        break; // anything newer than this page
    }
  }

  function onClose(closed, event) {
    if (socket !== closed) return;
    socket = null;
    if (mode !== 'hands-free') return;
    let why = "The listening connection to Charlie's server closed.";
    if (event.code === 4401) why = 'You are signed out: sign in again to talk hands-free.';
    else if (lastError) why = `Hands-free listening stopped: ${lastError}`;
    stopHandsFree();
    showProblem(why);
  }

  async function handsFreeTurn(start, end) {
    const mine = run;
    setState('thinking');
    const pcm = between(start - PAD_SECONDS, end + PAD_SECONDS);
    await spokenTurn(pcm, mine);
    if (mine !== run) return;
    restart();
    setState('listening');
  }

  async function startHandsFree() {
    if (mode !== 'off' || !usable()) return;
    hideProblem();
    player.unlock();
    mode = 'hands-free';
    run += 1;
    const mine = run;
    press(handsButton, true);
    talkButton.setAttribute('aria-disabled', 'true'); // one way of talking at a time
    early = [];
    ready = false;
    resets = 0;
    lastError = '';
    frames = [];
    firstSample = 0;
    streamed = 0;
    setState('listening');
    let opened;
    try {
      opened = await openMic((frame) => {
        if (mine === run) onListeningFrame(frame);
      });
    } catch (error) {
      if (mine === run) {
        stopHandsFree();
        showProblem(error.message);
      }
      return;
    }
    if (mine !== run) {
      opened.close();
      return;
    }
    mic = opened;
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const listener = new WebSocket(`${scheme}//${location.host}/api/voice/listen`);
    listener.binaryType = 'arraybuffer';
    listener.addEventListener('message', onMessage);
    listener.addEventListener('close', (event) => onClose(listener, event));
    socket = listener;
  }

  function stopHandsFree() {
    run += 1;
    mode = 'off';
    press(handsButton, false);
    talkButton.setAttribute('aria-disabled', String(Boolean(unusable)));
    closeMic();
    if (socket) {
      const closing = socket;
      socket = null;
      closing.close(1000, 'Hands-free is off.');
    }
    ready = false;
    early = [];
    frames = [];
    player.stop();
    setState('off');
  }

  handsButton.addEventListener('click', () => {
    if (mode === 'hands-free') stopHandsFree();
    else if (mode === 'off') startHandsFree();
    // While push-to-talk records or answers, this waits: one way of talking at a time.
  });

  // ------------------------------------------------------------ both

  function closeMic() {
    if (mic) mic.close();
    mic = null;
  }

  /** Send a recording as a spoken turn and play the answer; resolves when it has played. */
  async function spokenTurn(pcm, mine) {
    const sent = await chat.speak(pcm.buffer, {
      onAudio(chunk) {
        if (mine === run) player.play(chunk);
      },
    });
    if (!sent) showProblem('Charlie is still answering: say it again when the answer is done.');
    await player.finished();
  }

  /** Everything off: the microphone, the listener, the sound (signing out, say). */
  function stop() {
    if (mode === 'hands-free') stopHandsFree();
    else if (mode === 'talk') endTalk();
    hideProblem();
  }

  return {
    check,
    stop,
    get state() {
      return state;
    },
  };
}

// ------------------------------------------------------------ Settings → Voice

const ENGINE_STATES = {
  ready: { label: 'ready', badge: 'badge-current' },
  resting: { label: 'unreachable now', badge: 'badge-guard' },
  unavailable: { label: 'not installed here', badge: 'badge-error' },
};

function engineItem(engine, speaks) {
  const state = ENGINE_STATES[engine.state] || { label: engine.state, badge: '' };
  return h(
    'li',
    { dataset: { engine: engine.name, state: engine.state } },
    h(
      'div',
      {},
      h('span', { class: 'voice-engine-name' }, engine.name),
      h('span', { class: `badge ${state.badge}` }, state.label),
      engine.name === speaks ? h('span', { class: 'badge' }, 'speaks') : null,
      h('div', { class: 'muted small' }, engine.about),
      engine.detail ? h('div', { class: 'small voice-engine-detail' }, engine.detail) : null,
    ),
  );
}

function voiceFacts(status) {
  const speech = status.speech;
  const byName = Object.fromEntries(speech.engines.map((e) => [e.name, e]));
  const speaking = speech.speaks ? byName[speech.speaks].about : 'nothing: no engine can speak';
  const offline = speech.offline ? byName[speech.offline].about : 'nothing';
  return [
    h(
      'dl',
      { class: 'facts' },
      h('dt', {}, 'Speaks with'),
      h('dd', { id: 'voice-speaks' }, speaking),
      h('dt', {}, 'Without internet'),
      h('dd', { id: 'voice-offline' }, offline),
    ),
    h(
      'p',
      { id: 'voice-advice', class: speech.speaks ? 'callout' : 'callout callout-error' },
      speech.advice,
    ),
    status.available
      ? null
      : h('p', { class: 'callout callout-error' }, `Listening is off: ${status.problem}`),
    h(
      'ul',
      { class: 'voice-engines', id: 'voice-engines' },
      speech.engines.map((e) => engineItem(e, speech.speaks)),
    ),
    h(
      'p',
      { class: 'hint' },
      'Engines are tried in the order of CHARLIE_VOICE_TTS; the first that works speaks.',
    ),
  ];
}

/** Settings → Voice: which engine speaks, which speaks offline, how to get a better voice. */
export function voiceCard() {
  const body = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted small' }, 'Checking…'));
  get('/api/voice')
    .then((status) => body.replaceChildren(...voiceFacts(status).filter(Boolean)))
    .catch((error) => body.replaceChildren(h('p', { class: 'form-error' }, error.message)));
  return h(
    'section',
    { class: 'card', id: 'voice-settings', 'aria-labelledby': 'voice-settings-heading' },
    h('h2', { id: 'voice-settings-heading' }, 'Voice'),
    h(
      'p',
      { class: 'muted small' },
      'How Charlie answers aloud, with the microphone buttons or from the command line.',
    ),
    body,
  );
}
