// @ts-check
// The built-in model's offer. When no model server answers, an administrator is offered the
// starter model — "Use the built-in model (1.1 GB download, about 6 minutes)" — and nothing
// is downloaded until they press it. The download runs on the server; this banner shows its
// progress (part, bytes), offers a cancel, and says when the model is ready. Nobody else is
// offered it: only an administrator may fill the server's disk.

import { api, get, post } from './api.js';
import { $ } from './dom.js';

/** @typedef {import('./api-types.js').ModelStatus} ModelStatus */
/** @typedef {import('./api-types.js').ModelInstall} ModelInstall */

const POLL_MS = 500;
const RUNNING = new Set(['downloading', 'checking']);

export function createModelOffer(app) {
  const banner = $('#model-banner');
  const title = $('#model-title');
  const text = $('#model-text');
  const bar = /** @type {HTMLProgressElement} */ ($('#model-progress'));
  const install = $('#model-install');
  const cancel = $('#model-cancel');
  let offer = ''; // "1.1 GB download, about 6 minutes"
  let timer = 0;
  let polling = false;

  function show(heading, words, { installing = false, button = '' } = {}) {
    title.textContent = heading;
    text.textContent = words;
    bar.hidden = !installing;
    cancel.hidden = !installing;
    install.hidden = !button;
    install.textContent = button;
    banner.hidden = false;
  }

  /** @param {ModelInstall} progress */
  function showProgress(progress) {
    if (RUNNING.has(progress.state)) {
      const share = progress.total ? Math.min(progress.bytes / progress.total, 1) : 0;
      bar.value = Math.round(share * 100);
      show('Installing the built-in model.', `${progress.line}.`, { installing: true });
      bar.setAttribute('aria-valuetext', `${bar.value} %`);
    } else if (progress.state === 'done') {
      show(
        'The built-in model is ready.',
        'Charlie answers with it when no model server does.',
      );
    } else if (progress.state === 'cancelled') {
      show('The download was stopped.', progress.line, {
        button: `Go on with the built-in model (${offer})`,
      });
    } else if (progress.state === 'failed') {
      show('The built-in model could not be installed.', progress.error || progress.line, {
        button: 'Try again',
      });
    }
  }

  async function poll() {
    clearTimeout(timer);
    polling = true;
    try {
      /** @type {ModelInstall} */
      const progress = await get('/api/model/install');
      showProgress(progress);
      if (RUNNING.has(progress.state)) {
        timer = setTimeout(poll, POLL_MS);
        return;
      }
    } catch (error) {
      app.reportError(error, 'Checking the download failed');
    }
    polling = false;
  }

  install.addEventListener('click', async () => {
    install.hidden = true;
    try {
      showProgress(await post('/api/model/install'));
      poll();
    } catch (error) {
      install.hidden = false;
      app.reportError(error, 'The download could not start');
    }
  });

  cancel.addEventListener('click', async () => {
    clearTimeout(timer);
    cancel.hidden = true;
    text.textContent = 'Stopping the download…';
    try {
      showProgress(await api('DELETE', '/api/model/install'));
    } catch (error) {
      app.reportError(error, 'The download could not be stopped');
      poll();
    }
    polling = false;
  });

  return {
    /** No model server answers: offer the built-in model (administrators), or show how its
     * install is going. */
    async unreachable() {
      if (!app.user || !app.user.is_admin || polling) return;
      /** @type {ModelStatus} */
      let status;
      try {
        status = await get('/api/model');
      } catch (error) {
        if (error.status !== 0) app.reportError(error, 'Reading the built-in model failed');
        return;
      }
      offer = status.starter.offer;
      if (RUNNING.has(status.install.state)) {
        poll();
      } else if (status.model !== null || status.problem !== null) {
        banner.hidden = true; // a model is there (or the model banner says what is wrong)
      } else if (status.install.state !== 'idle') {
        showProgress(status.install); // stopped, or failed: said, with a button to go on
      } else {
        show('No model server answers.', 'Charlie can run a model of its own on this machine.', {
          button: `Use the built-in model (${offer})`,
        });
      }
    },
    /** A model server answers: the offer is of no use (a running install stays shown). */
    reachable() {
      if (!polling) banner.hidden = true;
    },
  };
}
