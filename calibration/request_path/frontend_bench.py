#!/usr/bin/env python3
"""Times, on one CPU core, the per-request and per-token work vLLM's API-server process does with the libraries it
uses (docs/REQUEST-PATH.md): Hugging Face `tokenizers` encode of a prompt (the tokenizer thread), incremental
detokenisation of one token with `tokenizers.decoders.DecodeStream` (vLLM's FastIncrementalDetokenizer,
vllm/v1/engine/detokenizer.py), and one streamed chunk's JSON (an OpenAI completion chunk as a dict through the
json module; vLLM builds it with pydantic and model_dump_json, also timed when pydantic is installed).

No model files exist on the machine that runs it (no network), so the tokenizer is a byte-level BPE with a
32,000-entry vocabulary (Llama-2's size) trained here on generated English-like text; encode speed depends on the
text and the merges, so the figure is an estimate of the same library's cost, not of Llama-2's own vocabulary.
Prints one YAML mapping (microseconds); writes it to --out when given.
"""
import argparse
import json
import random
import statistics
import sys
import time


def words(rng, n):
    # Zipf-like word list: common short words and rarer long ones, as English text has.
    syll = ["ka", "to", "ri", "en", "the", "an", "ing", "er", "on", "al", "re", "st", "ed", "ou", "is", "at", "le",
            "co", "de", "pro", "com", "ment", "tion", "ver", "pre", "ex", "un", "ab", "ly", "ful"]
    vocab = []
    for i in range(5000):
        k = 1 + min(int(rng.expovariate(0.7)), 5)
        vocab.append("".join(rng.choice(syll) for _ in range(k)))
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    out = rng.choices(vocab, weights=weights, k=n)
    text = []
    for i, w in enumerate(out):
        text.append(w)
        if rng.random() < 0.08:
            text.append(rng.choice([",", ".", ";", "\n", " 42", " 2026", "()", ":"]))
    return " ".join(text)


def median_us(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t0) / 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
    import tokenizers

    rng = random.Random(1)
    corpus = [words(rng, 200) for _ in range(3000)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=32000, show_progress=False))
    result = {"tokenizers_version": tokenizers.__version__, "python": sys.version.split()[0]}

    # Encode: prompts of about 150, 600 and 2400 tokens; µs per call and per token.
    for n_words in (100, 400, 1600):
        prompt = words(random.Random(n_words), n_words)
        n_tokens = len(tok.encode(prompt).ids)
        us = median_us(lambda: tok.encode(prompt), 200)
        result[f"encode_{n_tokens}_tokens_us"] = round(us, 2)
        result[f"encode_us_per_token_at_{n_tokens}"] = round(us / n_tokens, 4)

    # Incremental detokenisation: one step of DecodeStream per generated token (what vLLM's fast detokenizer does).
    ids = tok.encode(words(random.Random(7), 2000)).ids
    if hasattr(decoders, "DecodeStream"):
        def detok_all():
            stream = decoders.DecodeStream(skip_special_tokens=True)
            for i in ids[:1000]:
                stream.step(tok, i)
        result["detokenize_step_us"] = round(median_us(detok_all, 20) / 1000, 3)
    else:
        result["detokenize_step_us"] = None

    # One SSE chunk: an OpenAI completion chunk serialised and framed.
    chunk = {"id": "cmpl-0123456789abcdef0123456789abcdef", "object": "text_completion", "created": 1760000000,
             "model": "meta-llama/Llama-2-7b-hf",
             "choices": [{"index": 0, "text": " token", "logprobs": None, "finish_reason": None,
                          "stop_reason": None}], "usage": None}
    def sse_json():
        for _ in range(1000):
            s = "data: " + json.dumps(chunk, separators=(",", ":")) + "\n\n"
            s.encode()
    result["sse_chunk_json_us"] = round(median_us(sse_json, 20) / 1000, 3)
    try:
        import pydantic

        class Choice(pydantic.BaseModel):
            index: int
            text: str
            logprobs: object = None
            finish_reason: object = None
            stop_reason: object = None

        class Chunk(pydantic.BaseModel):
            id: str
            object: str
            created: int
            model: str
            choices: list[Choice]
            usage: object = None

        def sse_pydantic():
            for _ in range(1000):
                c = Chunk(id=chunk["id"], object="text_completion", created=1760000000, model=chunk["model"],
                          choices=[Choice(index=0, text=" token")])
                s = "data: " + c.model_dump_json(exclude_unset=True) + "\n\n"
                s.encode()
        result["sse_chunk_pydantic_us"] = round(median_us(sse_pydantic, 20) / 1000, 3)
        result["pydantic_version"] = pydantic.__version__
    except ImportError:
        result["sse_chunk_pydantic_us"] = None
    try:
        import msgspec  # vLLM's ZMQ serialisation (vllm/v1/serial_utils.py)
        enc = msgspec.msgpack.Encoder()
        dec = msgspec.msgpack.Decoder()
        outputs = [[i, [12345], None, None, 0] for i in range(128)]
        result["msgpack_128_outputs_roundtrip_us"] = round(median_us(lambda: dec.decode(enc.encode(outputs)), 200), 2)
    except ImportError:
        result["msgpack_128_outputs_roundtrip_us"] = None

    text = "\n".join(f"{k}: {v}" for k, v in result.items())
    print(text)
    if args.out:
        open(args.out, "w").write(text + "\n")


if __name__ == "__main__":
    main()
