"""The model both sides of a GPU benchmark ran, as comparable fields: the PyTorch peer's command-line
flags (--kv-heads 8 -> kv_heads = 8, a bare --tie-embeddings -> true) and the model section of the
config Atoll resolved (<run.dir>/config.yaml). bench_gpu.sh and bench_gpu_fp8.sh check one against
the other, so the two cannot drift apart unnoticed."""


def value(text):
    """A config scalar: true/false, else a number."""
    if text in ("true", "false"):
        return text == "true"
    number = float(text)
    return int(number) if number.is_integer() else number


def peer_model(flags):
    """The peer's flags as config fields (tie_embeddings false unless given)."""
    model = {flag[2:].replace("-", "_"): value(nxt if not nxt.startswith("--") else "true")
             for flag, nxt in zip(flags, flags[1:] + ["--"]) if flag.startswith("--")}
    model.setdefault("tie_embeddings", False)
    return model


def resolved_model(run_dir):
    """The model section of the config Atoll resolved and ran (<run.dir>/config.yaml, block style)."""
    model, section = {}, None
    for line in open(f"{run_dir}/config.yaml"):
        if not line.startswith(" "):
            section = line.strip().rstrip(":")
        elif section == "model":
            key, text = (s.strip() for s in line.split(":", 1))
            model[key] = text
    return model
