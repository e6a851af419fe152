#!/usr/bin/env python3
"""The include-layering check of tools/hygiene: every `#include "..."` of a project file must be
allowed by the including room's rule.

A room is one of certify/'s folders (io, report, ...) or reference/, packing/, fixtures/. The rules
are read from the READMEs, where people read them too:

- certify/README.md, the "may include" column of its table: one row per certify room, in
  dependency order (a rule may name only rooms in rows above its own);
- reference/README.md, packing/README.md, fixtures/README.md: the line "May include: ...".

The rule format is stated in certify/README.md ("The may-include rules"). Files outside the rooms
(tests/, tools/) are not checked. A violation prints `file:line: layering: ...` and the exit
status is 1; a rule that cannot be read is exit status 2.

Usage: tools/hygiene_layering.py [--root DIR]   (DIR: the repository root, default this checkout)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Optional

TOP_ROOMS = ("reference", "packing", "fixtures")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
TABLE_ROW = re.compile(r"^\|\s*\[([a-z_]+)/\]\([^)]*\)\s*\|(.*)\|\s*$")
MAY_INCLUDE = re.compile(r"^May include:\s*(.*)$")


class RuleError(Exception):
    """A rule that cannot be read: the README must be made precise, not the checker loose."""


@dataclass
class Rule:
    room: str                  # "certify/io", "reference", ...
    source: str                # "certify/README.md:12"
    text: str                  # the rule as written
    rooms: set[str] = field(default_factory=set)                 # every public header of these
    headers: dict[str, set[str]] = field(default_factory=dict)   # room -> allowed header names


def room_of(path: str) -> Optional[str]:
    """The room a repository path belongs to ("certify/io", "reference"), or None."""
    parts = path.split("/")
    if parts[0] == "certify" and len(parts) >= 3:
        return "certify/" + parts[1]
    if parts[0] in TOP_ROOMS and len(parts) >= 2:
        return parts[0]
    return None


def public_headers(root: str, room: str) -> set[str]:
    folder = os.path.join(root, room)
    if not os.path.isdir(folder):
        return set()
    return {f for f in os.listdir(folder) if f.endswith(".h")}


def split_top(text: str) -> list[str]:
    """Splits at commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [s.strip() for s in out if s.strip()]


def room_name(name: str, certify_rooms: set[str]) -> Optional[str]:
    name = name.strip("`").rstrip("/")
    if name in TOP_ROOMS:
        return name
    if name.startswith("certify/") and name in certify_rooms:
        return name
    if "certify/" + name in certify_rooms:
        return "certify/" + name
    return None


def parse_rule(root: str, room: str, source: str, text: str, certify_rooms: set[str]) -> Rule:
    rule = Rule(room, source, text.strip())
    project = text.split(";", 1)[0].strip()  # after ";": libraries, for people
    if project in ("nothing", "nothing of ncert"):
        return rule
    entry_re = re.compile(r"^(`?[a-z_/]+(?:\.h)?`?)\s*(?:\(([^()]*)\))?$")
    for entry in split_top(project):
        m = entry_re.match(entry)
        if not m:
            raise RuleError(f"{source}: cannot read the entry '{entry}' of the rule for {room}")
        name, listed = m.group(1).strip("`"), m.group(2)
        if name.endswith(".h"):  # one file: certify/io/hash.h
            target = room_of(name)
            if target is None or not os.path.isfile(os.path.join(root, name)) or listed:
                raise RuleError(f"{source}: '{entry}' in the rule for {room} is no public header of a room")
            rule.headers.setdefault(target, set()).add(os.path.basename(name))
            continue
        target = room_name(name, certify_rooms)
        if target is None:
            raise RuleError(f"{source}: '{name}' in the rule for {room} names no room")
        if listed is None:
            rule.rooms.add(target)
            continue
        existing = public_headers(root, target)
        for header in (h.strip().strip("`") for h in listed.split(":", 1)[0].split(",")):
            header = header if header.endswith(".h") else header + ".h"
            if header not in existing:
                raise RuleError(f"{source}: the rule for {room} names {target}/{header}, which does not exist")
            rule.headers.setdefault(target, set()).add(header)
    return rule


def read_rules(root: str) -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    certify_readme = os.path.join(root, "certify", "README.md")
    rows: list[tuple[str, str, str]] = []
    with open(certify_readme, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = TABLE_ROW.match(line)
            if m:
                cells = [c.strip() for c in m.group(2).split("|")]
                rows.append(("certify/" + m.group(1), f"certify/README.md:{number}", cells[-1]))
    certify_rooms = {room for room, _, _ in rows}
    for room, source, text in rows:
        rules[room] = parse_rule(root, room, source, text, certify_rooms)
    # The table's order is the dependency order: a rule names only rooms of rows above it.
    order = [room for room, _, _ in rows]
    for position, room in enumerate(order):
        named = rules[room].rooms | set(rules[room].headers)
        for other in sorted(named & set(order[position:])):
            raise RuleError(f"{rules[room].source}: the rule for {room} names {other}, "
                            f"which is not above it in the table (dependencies point down)")
    for room in TOP_ROOMS:
        readme = os.path.join(root, room, "README.md")
        lines = open(readme, encoding="utf-8").read().split("\n") if os.path.isfile(readme) else []
        found = None
        for number, line in enumerate(lines):
            m = MAY_INCLUDE.match(line)
            if m:  # the rule runs to the end of its first sentence or paragraph
                text = m.group(1)
                extra = number + 1
                while not re.search(r"\.(\s|$)", text) and extra < len(lines) and lines[extra].strip():
                    text += " " + lines[extra].strip()
                    extra += 1
                text = re.split(r"\.(?:\s|$)", text, maxsplit=1)[0]
                found = parse_rule(root, room, f"{room}/README.md:{number + 1}", text, certify_rooms)
                break
        if found is None:
            raise RuleError(f"{room}/README.md: no 'May include:' line")
        rules[room] = found
    return rules


def source_files(root: str) -> list[str]:
    out = []
    for top in ("certify",) + TOP_ROOMS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith((".cc", ".h")):
                    out.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return out


def check(root: str) -> list[str]:
    rules = read_rules(root)
    problems = []
    for path in source_files(root):
        room = room_of(path)
        if room is None:
            continue
        if room not in rules:
            problems.append(f"{path}:1: layering: {room} has no rule (add a row to certify/README.md's table)")
            continue
        rule = rules[room]
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                included = m.group(1)
                target = room_of(included)
                if target == room:
                    continue
                why = None
                if target is None:
                    if os.path.isfile(os.path.join(root, included)):
                        why = "a file outside the rooms"
                    else:
                        continue  # not a project file (a generated or third-party header)
                elif "/detail/" in included:
                    why = f"the internals (detail/) of {target}"
                elif target not in rule.rooms and \
                        os.path.basename(included) not in rule.headers.get(target, set()):
                    why = f"{target}, which its rule does not allow"
                if why:
                    problems.append(f'{path}:{number}: layering: {room} includes "{included}", {why} '
                                    f'({rule.source}: may include {rule.text})')
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    try:
        problems = check(args.root)
    except (RuleError, OSError) as e:
        print(f"layering: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
