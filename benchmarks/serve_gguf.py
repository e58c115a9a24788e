"""Serve a GGUF model over the OpenAI API with llama.cpp in-process (the `xllamacpp` wheel),
for the real-model benchmarks on a machine where no llama-server can be built:

    python -m venv ~/.cache/charlie/llama/venv
    ~/.cache/charlie/llama/venv/bin/pip install xllamacpp
    ~/.cache/charlie/llama/venv/bin/python benchmarks/serve_gguf.py MODEL.gguf --port 8089
    CHARLIE_LLM_BASE_URL=http://127.0.0.1:8089/v1 .venv/bin/python \
        benchmarks/memory_fidelity.py --server

It runs in the venv that has xllamacpp (not Charlie's), listens on 127.0.0.1 only, prints
the base URL once the model is loaded, and serves until stopped. The model's own chat
template is used (`use_jinja`), so Hermes tool calls and `response_format` work as they do
with llama-server.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

import xllamacpp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("model", help="the GGUF file")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--ctx", type=int, default=8192, help="the context window (-c)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=1, help="slots (-np)")
    parser.add_argument(
        "--chat-template-file", help="a Jinja chat template, for a GGUF that carries none"
    )
    parser.add_argument("--greedy", action="store_true", help="temperature 0, seed 1")
    args = parser.parse_args()
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.use_jinja = True
    params.port = args.port
    params.hostnames = ["127.0.0.1"]
    params.endpoint_props = True
    if args.chat_template_file:
        with open(args.chat_template_file, encoding="utf-8") as template:
            params.chat_template = template.read()
    if args.greedy:  # where a request names no temperature: the same answers each run
        params.sampling.temp = 0.0
        params.sampling.seed = 1
    started = time.perf_counter()
    server = xllamacpp.Server(params)
    url = f"{server.listening_address}/v1"
    print(f"serving {args.model} at {url} (loaded in {time.perf_counter() - started:.1f} s)")
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
