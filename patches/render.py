"""File patches back to diff text, in the order and spelling git uses."""

from __future__ import annotations

from collections.abc import Iterable

from patches.model import FilePatch, FileStatus, Hunk
from patches.paths import DEV_NULL, quote, write_label


def render(patches: FilePatch | Iterable[FilePatch], *, quote_non_ascii: bool = False) -> str:
    """Diff text for one file patch or several.

    `quote_non_ascii` writes non-ASCII path bytes as octal escapes, as git does unless
    core.quotePath is false (Crucible's sandbox runs git with it false).
    """
    if isinstance(patches, FilePatch):
        patches = [patches]
    return "".join(_render_one(patch, quote_non_ascii) for patch in patches)


def render_hunk(hunk: Hunk) -> str:
    return "".join([hunk.header + "\n", *(f"{line.kind}{line.text}\n" for line in hunk.lines)])


def _render_one(patch: FilePatch, quote_non_ascii: bool) -> str:
    if not patch.git:
        old = patch.old_label if patch.old_label is not None else write_label(patch.old_path, "a/", quote_non_ascii)
        new = patch.new_label if patch.new_label is not None else write_label(patch.new_path, "b/", quote_non_ascii)
        return "".join([f"--- {old}\n", f"+++ {new}\n", *(render_hunk(h) for h in patch.hunks)])
    a = patch.old_path if patch.old_path is not None else patch.new_path
    b = patch.new_path if patch.new_path is not None else patch.old_path
    if a is None or b is None:
        raise ValueError("a file patch needs a path")
    out = [f"diff --git {quote('a/' + a, quote_non_ascii)} {quote('b/' + b, quote_non_ascii)}"]
    if patch.status is FileStatus.ADDED:
        out.append(f"new file mode {patch.new_mode}")
    elif patch.status is FileStatus.DELETED:
        out.append(f"deleted file mode {patch.old_mode}")
    elif patch.old_mode and patch.new_mode and patch.old_mode != patch.new_mode:
        out += [f"old mode {patch.old_mode}", f"new mode {patch.new_mode}"]
    if patch.similarity is not None:
        out.append(f"similarity index {patch.similarity}%")
    if patch.dissimilarity is not None:
        out.append(f"dissimilarity index {patch.dissimilarity}%")
    if patch.status in (FileStatus.RENAMED, FileStatus.COPIED):
        verb = "rename" if patch.status is FileStatus.RENAMED else "copy"
        out += [f"{verb} from {quote(a, quote_non_ascii)}", f"{verb} to {quote(b, quote_non_ascii)}"]
    if patch.old_hash is not None and patch.new_hash is not None:
        same_mode = patch.old_mode is not None and patch.old_mode == patch.new_mode
        out.append(f"index {patch.old_hash}..{patch.new_hash}" + (f" {patch.old_mode}" if same_mode else ""))
    if patch.binary_hunks:
        out.append("GIT binary patch")
        for half in patch.binary_hunks:
            out += [f"{half.method} {half.size}", *half.data, ""]
    elif patch.binary:
        old = quote("a/" + patch.old_path, quote_non_ascii) if patch.old_path is not None else DEV_NULL
        new = quote("b/" + patch.new_path, quote_non_ascii) if patch.new_path is not None else DEV_NULL
        out.append(f"Binary files {old} and {new} differ")
    elif patch.hunks:
        out += [
            f"--- {write_label(patch.old_path, 'a/', quote_non_ascii)}",
            f"+++ {write_label(patch.new_path, 'b/', quote_non_ascii)}",
        ]
    return "\n".join(out) + "\n" + "".join(render_hunk(h) for h in patch.hunks)
