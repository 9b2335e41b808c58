"""Reading unified and git diffs into file patches.

Follows `git apply`: text around the file patches (a commit message, a mail signature)
is skipped; a hunk ends when the line counts in its header are used up, so a removed
line that reads "-- " is still part of the hunk. With `recount=True` the counts in hunk
headers are not trusted and are recounted from the lines, as `git apply --recount`
does; Crucible applies patches that way, so readers of agents' patches should too.
"""

from __future__ import annotations

import base64
import re
import zlib

from patches.model import MAX_BINARY_BYTES, BinaryHunk, FilePatch, FileStatus, Hunk, Line, LineKind, PatchError
from patches.paths import DEV_NULL, read_label, strip_prefix, unquote

HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
INDEX_RE = re.compile(r"^index ([0-9a-fA-F]+)\.\.([0-9a-fA-F]+)(?: ([0-7]{6}))?$")
MODE_RE = re.compile(r"^[0-7]{6}$")
PERCENT_RE = re.compile(r"^(\d{1,3})%$")
BINARY_RE = re.compile(r"^(literal|delta) (\d+)$")
_LENGTHS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
HUNK_KINDS = {
    " ": LineKind.CONTEXT,
    "": LineKind.CONTEXT,
    "+": LineKind.ADDED,
    "-": LineKind.REMOVED,
    "\\": LineKind.NO_NEWLINE,
}


def parse(text: str, *, recount: bool = False) -> list[FilePatch]:
    """The file patches in `text`, in order; PatchError says where and why it cannot be read."""
    return _Parser(text, recount).file_patches()


class _Parser:
    def __init__(self, text: str, recount: bool) -> None:
        # Lines end at "\n" only: a "\r" or form feed inside a line is content, as it is to git.
        self.lines = text.split("\n")
        if self.lines[-1] == "":
            self.lines.pop()
        self.recount = recount
        self.i = 0

    def line(self, offset: int = 0) -> str | None:
        at = self.i + offset
        return self.lines[at] if at < len(self.lines) else None

    def error(self, message: str, at: int | None = None) -> PatchError:
        return PatchError(f"line {(self.i if at is None else at) + 1}: {message}")

    def file_patches(self) -> list[FilePatch]:
        found: list[FilePatch] = []
        while (line := self.line()) is not None:
            if line.startswith("diff --git "):
                found.append(self.git_patch())
            elif line.startswith(("diff --cc ", "diff --combined ")):
                raise self.error("combined diffs (of a merge commit) are not supported")
            elif line.startswith("--- ") and (self.line(1) or "").startswith("+++ "):
                found.append(self.plain_patch())
            elif line.startswith("@@ -"):
                raise self.error("a hunk with no file header (diff --git, or ---/+++) before it")
            else:
                self.i += 1
        return found

    def plain_patch(self) -> FilePatch:
        start = self.i
        old_label, new_label = self.lines[self.i][4:], self.lines[self.i + 1][4:]
        old, new = read_label(old_label, "a/"), read_label(new_label, "b/")
        if old is None and new is None:
            raise self.error(f"both sides are {DEV_NULL}: the patch names no file")
        self.i += 2
        status = FileStatus.ADDED if old is None else FileStatus.DELETED if new is None else FileStatus.MODIFIED
        patch = FilePatch(old, new, status, git=False, old_label=old_label, new_label=new_label)
        patch.hunks = self.hunks(required=True)
        patch.text = self.text_since(start)
        return patch

    def git_patch(self) -> FilePatch:
        start = self.i
        header = self.lines[self.i][len("diff --git ") :]
        old, new = self.header_names(header)
        patch = FilePatch(old, new)
        renamed: dict[str, str] = {}
        self.i += 1
        while (line := self.line()) is not None and self.extended_header(patch, line, renamed):
            self.i += 1
        if renamed:
            if set(renamed) != {"from", "to"}:
                verb = "copy" if patch.status is FileStatus.COPIED else "rename"
                raise self.error(f"a {verb} needs both its 'from' and 'to' lines")
            old, new = renamed["from"], renamed["to"]
        line = self.line()
        labelled = False
        if line is not None and line.startswith("--- "):
            if not (self.line(1) or "").startswith("+++ "):
                raise self.error("a '---' line with no '+++' line after it")
            old_side, new_side = read_label(line[4:], "a/"), read_label(self.lines[self.i + 1][4:], "b/")
            if old_side is None and new_side is None:
                raise self.error(f"both sides are {DEV_NULL}: the patch names no file")
            if old_side is None and patch.status is FileStatus.MODIFIED:
                patch.status = FileStatus.ADDED
            if new_side is None and patch.status is FileStatus.MODIFIED:
                patch.status = FileStatus.DELETED
            old, new = old_side or old, new_side or new
            labelled = True
            self.i += 2
        elif line == "GIT binary patch":
            self.i += 1
            patch.binary = True
            patch.binary_hunks = [self.binary_hunk()]
            if BINARY_RE.match(self.line() or ""):
                patch.binary_hunks.append(self.binary_hunk())
        elif line is not None and line.startswith("Binary files ") and line.endswith(" differ"):
            self.i += 1
            patch.binary = True
        if old is None and new is None:
            raise self.error(f"cannot tell the file names apart in 'diff --git {header}'", start)
        patch.old_path = None if patch.status is FileStatus.ADDED else (old or new)
        patch.new_path = None if patch.status is FileStatus.DELETED else (new or old)
        patch.hunks = self.hunks(required=labelled)
        patch.text = self.text_since(start)
        return patch

    def header_names(self, header: str) -> tuple[str | None, str | None]:
        """The two names of a "diff --git" line; (None, None) when only later lines can tell."""
        if header.startswith('"'):
            first, rest = unquote(header)
            if not rest.startswith(" "):
                raise self.error(f"expected two names in 'diff --git {header}'")
            rest = rest[1:]
            second = unquote(rest)[0] if rest.startswith('"') else rest
            return strip_prefix(first, "a/"), strip_prefix(second, "b/")
        if header.endswith('"') and ' "' in header:
            # An unquoted name never holds a double quote, so the first ' "' is where the second begins.
            first, _, quoted = header.partition(' "')
            return strip_prefix(first, "a/"), strip_prefix(unquote('"' + quoted)[0], "b/")
        # Names may hold spaces. The same name on both sides is by far the most common: split in the middle.
        half = (len(header) - 1) // 2
        if len(header) % 2 == 1 and header[half] == " ":
            first, second = header[:half], header[half + 1 :]
            if strip_prefix(first, "a/") == strip_prefix(second, "b/"):
                return strip_prefix(first, "a/"), strip_prefix(second, "b/")
        if header.count(" b/") == 1:
            first, _, second = header.partition(" b/")
            return strip_prefix(first, "a/"), second
        return None, None

    def extended_header(self, patch: FilePatch, line: str, renamed: dict[str, str]) -> bool:
        """Read one line between "diff --git" and the body into `patch`; False at the first other line."""
        key, value = _split_header(line)
        if key in ("old mode", "deleted file mode"):
            patch.old_mode = self.mode(value)
            if key == "deleted file mode":
                patch.status = FileStatus.DELETED
        elif key in ("new mode", "new file mode"):
            patch.new_mode = self.mode(value)
            if key == "new file mode":
                patch.status = FileStatus.ADDED
        elif key in ("similarity index", "dissimilarity index"):
            match = PERCENT_RE.match(value)
            if not match or int(match.group(1)) > 100:
                raise self.error(f"bad {key} {value!r}")
            setattr(patch, key.split()[0], int(match.group(1)))
        elif key in ("rename from", "rename to", "rename old", "rename new", "copy from", "copy to"):
            patch.status = FileStatus.COPIED if key.startswith("copy") else FileStatus.RENAMED
            side = "from" if key.endswith(("from", "old")) else "to"
            renamed[side] = unquote(value)[0] if value.startswith('"') else value
        elif key == "index":
            match = INDEX_RE.match(line)
            if not match:
                raise self.error(f"bad index line {line!r}")
            patch.old_hash, patch.new_hash = match.group(1), match.group(2)
            if match.group(3):
                patch.old_mode = patch.new_mode = match.group(3)
        else:
            return False
        return True

    def mode(self, value: str) -> str:
        if not MODE_RE.match(value):
            raise self.error(f"bad file mode {value!r}")
        return value

    def hunks(self, required: bool) -> list[Hunk]:
        hunks: list[Hunk] = []
        while (line := self.line()) is not None:
            if self.recount and line == "" and hunks:
                # Hand-edited patches put blank lines between hunks; recounting git reads on to the next one.
                ahead = self.i
                while ahead < len(self.lines) and self.lines[ahead] == "":
                    ahead += 1
                if ahead < len(self.lines) and self.lines[ahead].startswith("@@ -"):
                    self.i = ahead
                    continue
                break
            if not line.startswith("@@ -"):
                break
            hunks.append(self.hunk())
        if required and not hunks:
            raise self.error("a ---/+++ file header with no hunk after it")
        return hunks

    def hunk(self) -> Hunk:
        start = self.i
        match = HUNK_RE.match(self.lines[self.i])
        if not match:
            raise self.error(f"bad hunk header {self.lines[self.i]!r}")
        old_start, old_len, new_start, new_len, rest = match.groups()
        hunk = Hunk(
            int(old_start),
            1 if old_len is None else int(old_len),
            int(new_start),
            1 if new_len is None else int(new_len),
            rest[1:] if rest.startswith(" ") else rest,
        )
        self.i += 1
        if self.recount:
            self.recounted_lines(hunk)
        else:
            self.counted_lines(hunk, start)
        return hunk

    def counted_lines(self, hunk: Hunk, start: int) -> None:
        old_left, new_left = hunk.old_len, hunk.new_len
        while old_left > 0 or new_left > 0:
            line = self.line()
            if line is None:
                raise self.error(
                    f"the patch ends inside the hunk that starts on line {start + 1} "
                    f"({old_left} old and {new_left} new lines missing)"
                )
            kind = HUNK_KINDS.get(line[:1])
            if kind is None:
                raise self.error(
                    f"{line[:60]!r} is not a hunk line (the hunk that starts on line {start + 1} "
                    f"still needs {old_left} old and {new_left} new lines)"
                )
            old_left -= kind in (LineKind.CONTEXT, LineKind.REMOVED)
            new_left -= kind in (LineKind.CONTEXT, LineKind.ADDED)
            if old_left < 0 or new_left < 0:
                raise self.error(f"the hunk that starts on line {start + 1} has more lines than its header says")
            self.add_line(hunk, kind, line)
        if (self.line() or "").startswith("\\"):
            self.add_line(hunk, LineKind.NO_NEWLINE, self.lines[self.i])

    def recounted_lines(self, hunk: Hunk) -> None:
        while (line := self.line()) is not None and (kind := HUNK_KINDS.get(line[:1])) is not None:
            if line.startswith("--- ") and (self.line(1) or "").startswith("+++ "):
                break  # the next file of a plain diff
            self.add_line(hunk, kind, line)
        # Blank lines after the last hunk are padding (between mail parts, at the end), not context.
        while hunk.lines and hunk.lines[-1] == Line(LineKind.CONTEXT, "") and self.lines[self.i - 1] == "":
            hunk.lines.pop()
            self.i -= 1
        hunk.old_len = sum(line.kind in (LineKind.CONTEXT, LineKind.REMOVED) for line in hunk.lines)
        hunk.new_len = sum(line.kind in (LineKind.CONTEXT, LineKind.ADDED) for line in hunk.lines)

    def add_line(self, hunk: Hunk, kind: LineKind, line: str) -> None:
        if kind is LineKind.NO_NEWLINE and (not hunk.lines or hunk.lines[-1].kind is LineKind.NO_NEWLINE):
            raise self.error("a 'No newline at end of file' marker that follows no line")
        hunk.lines.append(Line(kind, line[1:]))
        self.i += 1

    def binary_hunk(self) -> BinaryHunk:
        match = BINARY_RE.match(self.line() or "")
        if not match:
            raise self.error(f"expected 'literal N' or 'delta N' in a GIT binary patch, not {self.line()!r}")
        method, size = match.group(1), int(match.group(2))
        start = self.i
        self.i += 1
        data: list[str] = []
        packed = bytearray()
        while (line := self.line()) is not None and line != "":
            packed += self.base85_line(line)
            data.append(line)
            self.i += 1
        if line is not None:
            self.i += 1  # the blank line that ends the data
        if size > MAX_BINARY_BYTES:
            raise self.error(f"a GIT binary patch of {size} bytes is over the {MAX_BINARY_BYTES}-byte limit", start)
        try:
            # Bounded: a few kilobytes of deflate can claim gigabytes (a zip bomb aimed at the scorer).
            inflated = len(zlib.decompressobj().decompress(bytes(packed), size + 1))
        except zlib.error as exc:
            raise self.error(f"the {method} data of a GIT binary patch does not inflate ({exc})", start) from None
        if inflated != size:
            raise self.error(f"the {method} data of a GIT binary patch inflates to {inflated} bytes, not {size}", start)
        return BinaryHunk(method, size, tuple(data))

    def base85_line(self, line: str) -> bytes:
        # The first character says how many bytes the line holds: A-Z for 1-26, a-z for 27-52.
        code = line[:1]
        count = _LENGTHS.find(code) + 1 if code else 0
        if count == 0 or len(line) - 1 != (count + 3) // 4 * 5:
            raise self.error(f"corrupt line in a GIT binary patch: {line[:60]!r}")
        try:
            return base64.b85decode(line[1:])[:count]
        except ValueError:
            raise self.error(f"corrupt line in a GIT binary patch: {line[:60]!r}") from None

    def text_since(self, start: int) -> str:
        return "\n".join(self.lines[start : self.i]) + "\n"


def _split_header(line: str) -> tuple[str, str]:
    for key in (
        "old mode",
        "new mode",
        "deleted file mode",
        "new file mode",
        "similarity index",
        "dissimilarity index",
        "rename from",
        "rename to",
        "rename old",
        "rename new",
        "copy from",
        "copy to",
        "index",
    ):
        if line.startswith(key + " "):
            return key, line[len(key) + 1 :]
    return "", line
