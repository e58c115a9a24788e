// The microphone's audio thread: mixes the input to mono, brings it down to 16 kHz (each
// output sample is the mean of the input samples it covers, which also keeps frequencies
// above 8 kHz from folding back into speech), and posts 16-bit frames of about 100 ms to
// the page. Sent `'flush'`, it posts what it has so far as `{ last: ArrayBuffer }`.

class MicFrames extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const { rate = 16000, frame = 1600 } = options.processorOptions || {};
    this.step = sampleRate / rate; // input samples per output sample
    this.size = frame;
    this.out = new Int16Array(frame);
    this.filled = 0;
    this.sum = 0;
    this.count = 0;
    this.position = 0; // input samples into the current output sample
    this.last = 0;
    this.port.onmessage = (event) => {
      if (event.data === 'flush') {
        const rest = this.out.slice(0, this.filled);
        this.filled = 0;
        this.port.postMessage({ last: rest.buffer }, [rest.buffer]);
      }
    };
  }

  emit(value) {
    const clamped = Math.max(-1, Math.min(1, value));
    this.out[this.filled] = clamped < 0 ? clamped * 0x8000 : clamped * 0x7fff;
    this.filled += 1;
    if (this.filled === this.size) {
      this.port.postMessage(this.out.buffer, [this.out.buffer]);
      this.out = new Int16Array(this.size);
      this.filled = 0;
    }
  }

  process(inputs) {
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true; // no input yet (or muted)
    const length = channels[0].length;
    for (let i = 0; i < length; i += 1) {
      let x = 0;
      for (const channel of channels) x += channel[i];
      this.sum += x / channels.length;
      this.count += 1;
      this.position += 1;
      while (this.position >= this.step) {
        this.position -= this.step;
        if (this.count) this.last = this.sum / this.count;
        this.sum = 0;
        this.count = 0;
        this.emit(this.last);
      }
    }
    return true;
  }
}

registerProcessor('charlie-mic', MicFrames);
