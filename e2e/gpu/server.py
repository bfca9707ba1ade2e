#!/usr/bin/env python3
"""A small OpenAI-compatible streaming server over a real engine on a GPU.

Used by e2e/gpu/run.sh to give infer_exporter a real inference engine with
real GPU latencies. The model is a randomly initialised Llama (about 0.8B
parameters, bf16) built from a LlamaConfig: no weights are downloaded.

Engines (--engine):
  cb        transformers' ContinuousBatchingManager (init_continuous_batching,
            add_request(streaming=True), one router thread calling
            get_result). The default.
  generate  fallback: batches formed at batch boundaries and run through
            model.generate, each step's tokens taken by a logits processor.
            Used automatically when cb fails its start-up self-test.
  fake      no torch: a thread that pretends to decode (a fixed step time per
            batch), for checking the HTTP/SSE layer on a machine without GPU.

API (what infer_exporter's openai-chat / openai-completions flavors use):
  POST /v1/chat/completions, POST /v1/completions (stream true or false;
       stream_options.include_usage; max_tokens / max_completion_tokens;
       ignore_eos), POST /tokenize (vLLM's dialect), GET /v1/models,
       GET /health.

Tokenizer: no tokenizer files exist here, so a deterministic word-level one:
every white-space word is one token (crc32 of the word mod the vocabulary),
a prompt gets one BOS token, a chat request a fixed template (3 tokens per
message plus 2 for the generation prompt). Generated ids are detokenized to
short words, so the stream carries text.

Every request is logged, as one JSON line in --request-log, under its
X-Request-Id header: arrival, first and last token written to the socket
(unix ns), the engine's first and last token (when the router got them),
prompt and completion tokens, and the outcome.

--per-request-metrics answers as vLLM's --enable-per-request-metrics does:
a "metrics" object on the final usage chunk (and in a non-streamed body)
with the engine's own times, from the same clocks as the log: the engine's
arrival is the submit to the engine (after tokenization), its scheduling
the step that took the request (fake and generate engines; transformers'
continuous batching exposes no such instant, so there queue_time_ms is left
out and time_to_first_token_ms runs from the submit, its queue included),
the first and last token when the router got them.
"""

import argparse
import asyncio
import itertools
import json
import os
import queue
import sys
import threading
import time
import traceback
import zlib

from aiohttp import web

BOS, EOS, PAD = 1, 2, 0
MSG_START, MSG_END = 3, 4
ROLE_IDS = {"system": 5, "user": 6, "assistant": 7}
FIRST_WORD_ID = 8
WORDS = (
    "a an the of to in on at it is be as by we or if so do go up no my me us he "
    "sun sea sky day way red one two ten map key cat dog box cup pen hat car bus "
    "run sit fly eat see say ask try use mix fix add cut lit hot big new old far"
).split()


def log(*a):
    print(time.strftime("%H:%M:%S"), "server:", *a, file=sys.stderr, flush=True)


class WordTokenizer:
    """Each white-space word is one token; deterministic across processes."""

    def __init__(self, vocab):
        self.vocab = vocab

    def word_id(self, w):
        return FIRST_WORD_ID + zlib.crc32(w.encode("utf-8", "replace")) % (self.vocab - FIRST_WORD_ID)

    def text_ids(self, text):
        return [self.word_id(w) for w in text.split()]

    def prompt_ids(self, prompt, add_special=True):
        return ([BOS] if add_special else []) + self.text_ids(prompt)

    @staticmethod
    def content_text(content):
        if content is None:
            return ""
        if isinstance(content, str):
            return content
        if isinstance(content, list):  # OpenAI content parts
            return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(content)

    def chat_ids(self, messages, add_generation_prompt=True):
        ids = [BOS]
        for m in messages:
            ids += [MSG_START, ROLE_IDS.get(m.get("role", "user"), ROLE_IDS["user"])]
            ids += self.text_ids(self.content_text(m.get("content")))
            ids.append(MSG_END)
        if add_generation_prompt:
            ids += [MSG_START, ROLE_IDS["assistant"]]
        return ids

    @staticmethod
    def piece(token_id):
        return " " + WORDS[token_id % len(WORDS)]


# ---------------------------------------------------------------- engines
#
# An engine takes submit(rid, ids, max_new, ignore_eos) and calls
# emit(rid, tokens, finished, error) from its own thread, tokens being all the
# tokens generated so far for that request (a snapshot list).


class FakeEngine:
    """Pretends to decode: every step (step_ms) gives each active request one
    token; a request's first token comes after a prefill step that costs
    prefill_ms_per_1k per 1000 prompt tokens."""

    name = "fake"

    def __init__(self, emit, step_ms=20.0, prefill_ms_per_1k=15.0, scheduled=None):
        self.emit = emit
        self.scheduled = scheduled or (lambda rid: None)
        self.step = step_ms / 1000
        self.prefill = prefill_ms_per_1k / 1e6
        self.inq = queue.Queue()
        self.stop_ev = threading.Event()
        self.th = threading.Thread(target=self._loop, daemon=True)
        self.th.start()

    def submit(self, rid, ids, max_new, ignore_eos):
        self.inq.put((rid, len(ids), max_new))

    def cancel(self, rid):
        pass

    def _loop(self):
        active = {}  # rid -> [tokens, max_new]
        while not self.stop_ev.is_set():
            new = []
            while True:
                try:
                    new.append(self.inq.get_nowait())
                except queue.Empty:
                    break
            if not active and not new:
                time.sleep(0.002)
                continue
            for rid, _, _ in new:
                self.scheduled(rid)
            cost = self.step + sum(n for _, n, _ in new) * self.prefill
            time.sleep(cost)
            for rid, n, m in new:
                active[rid] = [[], m]
            done = []
            for rid, st in active.items():
                st[0].append(FIRST_WORD_ID + (len(st[0]) * 7919 + n) % 1000)
                fin = len(st[0]) >= st[1]
                self.emit(rid, list(st[0]), fin, None)
                if fin:
                    done.append(rid)
            for rid in done:
                del active[rid]

    def close(self):
        self.stop_ev.set()


def build_model(args):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    kw = dict(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads, max_position_embeddings=args.max_model_len,
        bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, tie_word_embeddings=False,
    )
    cfg = LlamaConfig(**kw)
    try:
        cfg._attn_implementation = "sdpa"
    except Exception:  # noqa: BLE001 - older/newer configs may refuse; the default is fine
        pass
    torch.manual_seed(0)
    t = time.time()
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    model = model.to(device="cuda", dtype=torch.bfloat16).eval()
    n = sum(p.numel() for p in model.parameters())
    log(f"model: random Llama, {n / 1e9:.3f}B parameters, bf16, built in {time.time() - t:.1f}s, "
        f"attn={getattr(model.config, '_attn_implementation', '?')}")
    return model, n


def output_finished(out):
    f = getattr(out, "is_finished", None)
    if callable(f):
        try:
            return bool(f())
        except Exception:  # noqa: BLE001
            pass
    st = getattr(out, "status", None)
    return getattr(st, "name", str(st)).upper().endswith(("FINISHED", "FAILED"))


class CBEngine:
    """transformers' continuous batching: one manager, one router thread."""

    name = "cb"

    def __init__(self, emit, model, max_new_default):
        import torch  # noqa: F401
        from transformers import GenerationConfig

        self.emit = emit
        gc = GenerationConfig(max_new_tokens=max_new_default, do_sample=False, eos_token_id=-1,
                              pad_token_id=PAD, bos_token_id=BOS)
        self.manager = model.init_continuous_batching(generation_config=gc)
        self.manager.start()
        self.stop_ev = threading.Event()
        self.th = threading.Thread(target=self._route, daemon=True)
        self.th.start()
        self._eos_kw = True

    def submit(self, rid, ids, max_new, ignore_eos):
        kw = dict(input_ids=ids, request_id=rid, max_new_tokens=max_new, streaming=True)
        if self._eos_kw:
            try:
                self.manager.add_request(eos_token_id=(-1 if ignore_eos else EOS), **kw)
                return
            except TypeError:
                self._eos_kw = False  # this version has no per-request EOS: the config's -1 holds
        self.manager.add_request(**kw)

    def cancel(self, rid):
        f = getattr(self.manager, "cancel_request", None)
        if f:
            try:
                f(rid)
            except Exception:  # noqa: BLE001
                pass

    def _route(self):
        while not self.stop_ev.is_set():
            try:
                out = self.manager.get_result(timeout=0.05)
            except Exception as e:  # noqa: BLE001
                log("get_result:", repr(e))
                time.sleep(0.05)
                continue
            if out is None:
                running = getattr(self.manager, "is_running", None)
                if running is not None and not running():
                    time.sleep(0.05)  # get_result returns at once once the generation thread is gone
                continue
            fin = output_finished(out)
            st = getattr(out, "status", None)
            err = getattr(out, "error", None)
            if err is None and "FAILED" in getattr(st, "name", str(st)).upper():
                err = "engine failed the request"
            toks = [int(t) for t in (getattr(out, "generated_tokens", None) or [])]
            self.emit(out.request_id, toks, fin, err)

    def close(self):
        self.stop_ev.set()
        try:
            self.manager.stop(block=True, timeout=10)
        except Exception:  # noqa: BLE001
            pass


class GenerateEngine:
    """Fallback: batch-boundary batching through model.generate. Requests that
    arrive while a batch runs wait for the next; each step's tokens are taken
    by a logits processor (it sees the token of the previous step)."""

    name = "generate"

    def __init__(self, emit, model, max_batch=64, scheduled=None):
        self.emit = emit
        self.scheduled = scheduled or (lambda rid: None)
        self.model = model
        self.max_batch = max_batch
        self.inq = queue.Queue()
        self.stop_ev = threading.Event()
        self.th = threading.Thread(target=self._loop, daemon=True)
        self.th.start()

    def submit(self, rid, ids, max_new, ignore_eos):
        self.inq.put((rid, ids, max_new))

    def cancel(self, rid):
        pass

    def _loop(self):
        import torch
        from transformers import LogitsProcessor, LogitsProcessorList

        engine = self

        class Tap(LogitsProcessor):
            def __init__(self, reqs, plen):
                self.reqs, self.plen = reqs, plen
                self.toks = [[] for _ in reqs]

            def __call__(self, input_ids, scores):
                if input_ids.shape[1] > self.plen:
                    last = input_ids[:, -1].tolist()
                    for i, (rid, _, m) in enumerate(self.reqs):
                        if len(self.toks[i]) < m:
                            self.toks[i].append(int(last[i]))
                            engine.emit(rid, list(self.toks[i]), len(self.toks[i]) >= m, None)
                return scores

        while not self.stop_ev.is_set():
            try:
                first = self.inq.get(timeout=0.05)
            except queue.Empty:
                continue
            reqs = [first]
            while len(reqs) < self.max_batch:
                try:
                    reqs.append(self.inq.get_nowait())
                except queue.Empty:
                    break
            for r in reqs:
                self.scheduled(r[0])
            plen = max(len(r[1]) for r in reqs)
            ids = torch.full((len(reqs), plen), PAD, dtype=torch.long)
            mask = torch.zeros((len(reqs), plen), dtype=torch.long)
            for i, (_, p, _) in enumerate(reqs):
                ids[i, plen - len(p):] = torch.tensor(p)
                mask[i, plen - len(p):] = 1
            tap = Tap(reqs, plen)
            m = max(r[2] for r in reqs)
            try:
                with torch.inference_mode():
                    out = self.model.generate(
                        input_ids=ids.cuda(), attention_mask=mask.cuda(), max_new_tokens=m, min_new_tokens=m,
                        do_sample=False, eos_token_id=None, pad_token_id=PAD,
                        logits_processor=LogitsProcessorList([tap]))
                last = out[:, -1].tolist()
                for i, (rid, _, mi) in enumerate(reqs):
                    if len(tap.toks[i]) < mi:
                        tap.toks[i].append(int(last[i]))
                        self.emit(rid, list(tap.toks[i]), True, None)
            except Exception as e:  # noqa: BLE001
                log("generate failed:", repr(e))
                for i, (rid, _, _) in enumerate(reqs):
                    self.emit(rid, list(tap.toks[i]), True, repr(e))

    def close(self):
        self.stop_ev.set()


# ---------------------------------------------------------------- server


class Stream:
    """One request's channel from the engine thread to its handler."""

    __slots__ = ("q", "loop", "engine_first_ns", "engine_last_ns", "submit_ns", "scheduled_ns")

    def __init__(self, loop):
        self.q = asyncio.Queue()
        self.loop = loop
        self.engine_first_ns = 0
        self.engine_last_ns = 0
        self.submit_ns = 0
        self.scheduled_ns = 0

    def metrics(self):
        """vLLM's per-request metrics object, in ms, from this request's clocks."""
        m = {}
        if not (self.submit_ns and self.engine_first_ns):
            return m
        origin = self.submit_ns
        if self.scheduled_ns:
            m["queue_time_ms"] = (self.scheduled_ns - self.submit_ns) / 1e6
            origin = self.scheduled_ns
        m["time_to_first_token_ms"] = (self.engine_first_ns - origin) / 1e6
        if self.engine_last_ns:
            m["generation_time_ms"] = (self.engine_last_ns - self.engine_first_ns) / 1e6
        return m


class App:
    def __init__(self, args):
        self.args = args
        self.tok = WordTokenizer(args.vocab)
        self.streams = {}
        self.lock = threading.Lock()
        self.counter = itertools.count()
        self.engine = None
        self.engine_name = ""
        self.params = 0
        self.ready = False
        self.reqlog = open(args.request_log, "a", buffering=1) if args.request_log else None

    # called from engine threads
    def scheduled(self, rid):
        now = time.time_ns()
        with self.lock:
            s = self.streams.get(rid)
        if s is not None and not s.scheduled_ns:
            s.scheduled_ns = now

    def emit(self, rid, toks, finished, err):
        now = time.time_ns()
        with self.lock:
            s = self.streams.get(rid)
        if s is None:
            return
        if toks and not s.engine_first_ns:
            s.engine_first_ns = now
        if finished:
            s.engine_last_ns = now
        s.loop.call_soon_threadsafe(s.q.put_nowait, (toks, finished, err))

    def start_engine(self):
        a = self.args
        if a.engine == "fake":
            self.engine = FakeEngine(self.emit, a.fake_step_ms, a.fake_prefill_ms, self.scheduled)
            self.engine_name = "fake"
            return
        model, self.params = build_model(a)
        if a.engine == "cb":
            try:
                self.engine = CBEngine(self.emit, model, a.default_max_tokens)
                self.engine_name = "cb"
                return
            except Exception:  # noqa: BLE001
                log("continuous batching failed to start; falling back to generate:\n" + traceback.format_exc())
        self.engine = GenerateEngine(self.emit, model, scheduled=self.scheduled)
        self.engine_name = "generate"

    def fallback_to_generate(self, why):
        log(f"engine {self.engine_name} failed its self-test ({why}); falling back to generate")
        old = self.engine
        try:
            old.close()
        except Exception:  # noqa: BLE001
            pass
        model = old.manager.model if hasattr(old, "manager") else None
        if model is None:
            model, self.params = build_model(self.args)
        self.engine = GenerateEngine(self.emit, model, scheduled=self.scheduled)
        self.engine_name = "generate"

    async def run_one(self, ids, max_new, ignore_eos=True, timeout=120.0):
        """Run a request inside the server (self-test and warm-up)."""
        rid = f"selftest-{next(self.counter)}"
        s = Stream(asyncio.get_running_loop())
        with self.lock:
            self.streams[rid] = s
        try:
            self.engine.submit(rid, ids, max_new, ignore_eos)
            n = 0
            while True:
                toks, fin, err = await asyncio.wait_for(s.q.get(), timeout)
                n = len(toks)
                if err:
                    raise RuntimeError(err)
                if fin:
                    return n
        finally:
            with self.lock:
                self.streams.pop(rid, None)

    async def selftest(self):
        a = self.args
        shapes = [(a.warmup_prompt, 16)] * a.warmup_requests + [(32, 8)]
        for attempt in range(2):
            t = time.time()
            try:
                ns = await asyncio.gather(*[
                    self.run_one([BOS] + [FIRST_WORD_ID + (i * 31 + j) % 1000 for j in range(p)], m)
                    for i, (p, m) in enumerate(shapes)])
                bad = [(n, m) for n, (_, m) in zip(ns, shapes) if n != m]
                if bad:
                    raise RuntimeError(f"wrong token counts (got, wanted): {bad}")
                log(f"self-test/warm-up with engine {self.engine_name}: {len(shapes)} requests in "
                    f"{time.time() - t:.2f}s, token counts exact")
                return
            except Exception as e:  # noqa: BLE001
                if self.engine_name == "generate" or attempt == 1:
                    raise
                self.fallback_to_generate(repr(e))

    # ------------------------------------------------------------ handlers

    async def health(self, request):
        return web.Response(status=200 if self.ready else 503, text="" if self.ready else "loading")

    async def models(self, request):
        return web.json_response({"object": "list", "data": [{
            "id": self.args.model, "object": "model", "created": int(time.time()), "owned_by": "e2e-gpu",
            "root": self.args.model, "max_model_len": self.args.max_model_len}]})

    async def tokenize(self, request):
        try:
            body = await request.json()
        except Exception:  # noqa: BLE001
            return web.json_response({"error": "invalid JSON"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "expected an object"}, status=400)
        if "messages" in body:
            ids = self.tok.chat_ids(body["messages"] or [], body.get("add_generation_prompt", True))
        elif "prompt" in body:
            ids = self.tok.prompt_ids(str(body["prompt"]), body.get("add_special_tokens", True))
        else:
            return web.json_response({"error": "need prompt or messages"}, status=400)
        return web.json_response({"count": len(ids), "max_model_len": self.args.max_model_len, "tokens": ids})

    async def chat(self, request):
        return await self.generate(request, chat=True)

    async def completions(self, request):
        return await self.generate(request, chat=False)

    def write_log(self, rec):
        if self.reqlog:
            self.reqlog.write(json.dumps(rec, separators=(",", ":")) + "\n")

    async def generate(self, request, chat):
        arrival = time.time_ns()
        hdr_id = request.headers.get("X-Request-Id", "")
        if not self.ready:
            return web.json_response({"error": {"message": "loading"}}, status=503)
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("expected an object")
            if chat:
                msgs = body.get("messages")
                if not isinstance(msgs, list) or not msgs:
                    raise ValueError("messages must be a non-empty list")
                ids = self.tok.chat_ids(msgs)
            else:
                p = body.get("prompt")
                if isinstance(p, list):
                    p = " ".join(map(str, p))
                if not isinstance(p, str):
                    raise ValueError("prompt must be a string")
                ids = self.tok.prompt_ids(p)
            max_new = body.get("max_tokens") or body.get("max_completion_tokens") or self.args.default_max_tokens
            max_new = int(max_new)
            if max_new < 1:
                raise ValueError("max_tokens must be at least 1")
        except Exception as e:  # noqa: BLE001
            self.write_log({"request_id": hdr_id, "path": request.path, "arrival_ns": arrival,
                            "status": "http_400", "error": str(e)})
            return web.json_response({"error": {"message": str(e), "type": "invalid_request_error"}}, status=400)
        if len(ids) + max_new > self.args.max_model_len:
            msg = (f"This model's maximum context length is {self.args.max_model_len} tokens; "
                   f"the request has {len(ids)} prompt and {max_new} output tokens")
            self.write_log({"request_id": hdr_id, "path": request.path, "arrival_ns": arrival,
                            "status": "http_400", "error": msg, "prompt_tokens": len(ids)})
            return web.json_response({"error": {"message": msg, "type": "invalid_request_error"}}, status=400)
        stream = bool(body.get("stream", False))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage", False))
        ignore_eos = bool(body.get("ignore_eos", False))

        rid = f"r{next(self.counter)}"
        s = Stream(asyncio.get_running_loop())
        with self.lock:
            self.streams[rid] = s
        rec = {"request_id": hdr_id, "engine_request_id": rid, "path": request.path, "stream": stream,
               "arrival_ns": arrival, "prompt_tokens": len(ids), "max_tokens": max_new,
               "ignore_eos": ignore_eos}
        created = int(time.time())
        cid = ("chatcmpl-" if chat else "cmpl-") + rid
        obj = "chat.completion.chunk" if chat else "text_completion"
        model = self.args.model
        first_ns = last_ns = 0
        n_out = 0
        status = "success"
        finish = "length"
        resp = None
        text_parts = []

        def chunk(choice):
            return ("data: " + json.dumps({"id": cid, "object": obj, "created": created, "model": model,
                                           "choices": [choice]}, separators=(",", ":")) + "\n\n").encode()

        try:
            s.submit_ns = time.time_ns()
            self.engine.submit(rid, ids, max_new, ignore_eos)
            if stream:
                resp = web.StreamResponse(status=200, headers={
                    "Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
                await resp.prepare(request)
                if chat:
                    await resp.write(chunk({"index": 0, "delta": {"role": "assistant", "content": ""},
                                            "logprobs": None, "finish_reason": None}))
            while True:
                toks, fin, err = await asyncio.wait_for(s.q.get(), self.args.request_timeout)
                if err:
                    status = "engine_error"
                    rec["error"] = str(err)[:500]
                    break
                new = toks[n_out:max_new]
                for t in new:
                    piece = self.tok.piece(t)
                    n_out += 1
                    if stream:
                        if chat:
                            c = {"index": 0, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}
                        else:
                            c = {"index": 0, "text": piece, "logprobs": None, "finish_reason": None}
                        await resp.write(chunk(c))
                        last_ns = time.time_ns()
                        if not first_ns:
                            first_ns = last_ns
                    else:
                        text_parts.append(piece)
                if fin or n_out >= max_new:
                    if n_out < max_new and not ignore_eos:
                        finish = "stop"
                    break
            if status != "success":
                if stream:
                    await resp.write(("data: " + json.dumps({"error": {"message": rec["error"]}}) + "\n\n").encode())
                    await resp.write(b"data: [DONE]\n\n")
                    await resp.write_eof()
                    return resp
                return web.json_response({"error": {"message": rec["error"]}}, status=500)
            usage = {"prompt_tokens": len(ids), "completion_tokens": n_out, "total_tokens": len(ids) + n_out}
            if stream:
                if chat:
                    c = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}
                else:
                    c = {"index": 0, "text": "", "logprobs": None, "finish_reason": finish}
                await resp.write(chunk(c))
                if include_usage:
                    final = {"id": cid, "object": obj, "created": created, "model": model, "choices": [],
                             "usage": usage}
                    if self.args.per_request_metrics:
                        final["metrics"] = s.metrics()
                    await resp.write(("data: " + json.dumps(final, separators=(",", ":")) + "\n\n").encode())
                await resp.write(b"data: [DONE]\n\n")
                await resp.write_eof()
                return resp
            text = "".join(text_parts)
            first_ns = last_ns = time.time_ns()
            if chat:
                choice = {"index": 0, "message": {"role": "assistant", "content": text},
                          "logprobs": None, "finish_reason": finish}
                o = "chat.completion"
            else:
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
                o = "text_completion"
            answer = {"id": cid, "object": o, "created": created, "model": model,
                      "choices": [choice], "usage": usage}
            if self.args.per_request_metrics:
                answer["metrics"] = s.metrics()
            return web.json_response(answer)
        except asyncio.TimeoutError:
            status = "timeout"
            self.engine.cancel(rid)
            if resp is None:
                return web.json_response({"error": {"message": "engine timeout"}}, status=504)
            return resp
        except (ConnectionResetError, asyncio.CancelledError):
            status = "disconnected"
            self.engine.cancel(rid)
            raise
        finally:
            with self.lock:
                self.streams.pop(rid, None)
            rec.update({"status": status, "completion_tokens": n_out, "first_token_ns": first_ns,
                        "last_token_ns": last_ns, "engine_first_ns": s.engine_first_ns,
                        "engine_last_ns": s.engine_last_ns, "submit_ns": s.submit_ns,
                        "scheduled_ns": s.scheduled_ns, "end_ns": time.time_ns(), "finish_reason": finish})
            self.write_log(rec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--engine", choices=["cb", "generate", "fake"], default="cb")
    ap.add_argument("--fake-engine", action="store_true", help="same as --engine fake")
    ap.add_argument("--model", default="e2e-random-llama-1b", help="served model name")
    ap.add_argument("--request-log", default="", help="JSONL file of per-request server timings")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--default-max-tokens", type=int, default=16)
    ap.add_argument("--request-timeout", type=float, default=120.0, help="seconds without a token before giving up")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=5632)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--warmup-requests", type=int, default=4, help="start-up self-test requests of --warmup-prompt tokens")
    ap.add_argument("--warmup-prompt", type=int, default=520)
    ap.add_argument("--fake-step-ms", type=float, default=20.0)
    ap.add_argument("--fake-prefill-ms", type=float, default=15.0, help="fake engine: ms per 1000 prompt tokens")
    ap.add_argument("--per-request-metrics", action="store_true",
                    help="answer with vLLM's per-request metrics object (the engine's queue, TTFT, generation)")
    ap.add_argument("--info-file", default="", help="write engine facts (JSON) here once ready")
    args = ap.parse_args()
    if args.fake_engine:
        args.engine = "fake"

    app_state = App(args)

    async def on_startup(app):
        # Listen first (so /health answers 503 while loading), then load.
        async def load():
            t = time.time()
            try:
                await asyncio.get_running_loop().run_in_executor(None, app_state.start_engine)
                await app_state.selftest()
            except Exception:  # noqa: BLE001
                log("start-up failed:\n" + traceback.format_exc())
                os._exit(3)
            app_state.ready = True
            info = {"engine": app_state.engine_name, "model": args.model, "parameters": app_state.params,
                    "startup_seconds": round(time.time() - t, 2), "max_model_len": args.max_model_len,
                    "config": {k: getattr(args, k) for k in ("vocab", "hidden", "intermediate", "layers",
                                                               "heads", "kv_heads")}}
            if args.engine != "fake":
                try:
                    import torch
                    import transformers
                    info.update({"torch": torch.__version__, "transformers": transformers.__version__,
                                 "gpu": torch.cuda.get_device_name(0),
                                 "gpu_memory_allocated_bytes": torch.cuda.memory_allocated(0)})
                except Exception:  # noqa: BLE001
                    pass
            if args.info_file:
                with open(args.info_file, "w") as f:
                    json.dump(info, f, indent=1)
            log("ready:", json.dumps(info))

        app["loader"] = asyncio.get_running_loop().create_task(load())

    app = web.Application(client_max_size=64 << 20)
    app.router.add_get("/health", app_state.health)
    app.router.add_get("/v1/models", app_state.models)
    app.router.add_post("/tokenize", app_state.tokenize)
    app.router.add_post("/v1/chat/completions", app_state.chat)
    app.router.add_post("/v1/completions", app_state.completions)
    app.on_startup.append(on_startup)
    log(f"listening on {args.host}:{args.port}, engine {args.engine}")
    web.run_app(app, host=args.host, port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
