"""`imprint settings`: list, get, set or reset the research settings."""
from __future__ import annotations

import argparse
import json

from imprint_core.errors import UserInputError

from ..conventions import EXIT_OK
from .console import console


def add_parser(sub: argparse._SubParsersAction) -> None:
    st = sub.add_parser("settings", help="list, get, set or reset the research settings",
                        description="Settings live in a TOML file (IMPRINT_CONFIG, or the user config dir); "
                                    "IMPRINT_CHAT_* environment variables override it.")
    st.add_argument("action", choices=["list", "get", "set", "reset"])
    st.add_argument("key", nargs="?")
    st.add_argument("value", nargs="?")
    st.add_argument("--config", help="the config file (default: $IMPRINT_CONFIG or the user config dir)")
    st.add_argument("--json", action="store_true")
    st.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from imprint_core.settings import SPECS, Settings
    s = Settings(args.config)
    if args.action == "list":
        rows = s.list()
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            from rich.table import Table
            t = Table(title=f"settings ({s.path})")
            for c in ("key", "value", "source", "default", "bounds", "description"):
                t.add_column(c)
            def shown(v):
                return f"{v:,}" if isinstance(v, int) else str(v)
            for r in rows:
                # a rule's name has no numeric bounds: its spec says what it takes
                bounds = (" | ".join(r["choices"]) if r.get("choices")
                          else SPECS[r["key"]].bounds() if r["min"] is None
                          else f"{r['min']:,}–{r['max']:,} {r['unit']}")
                t.add_row(r["key"], shown(r["value"]), r["source"], shown(r["default"]), bounds, r["description"])
            console().print(t)
        return EXIT_OK
    if args.action in ("get", "set") and not args.key:
        raise UserInputError(f"`settings {args.action}` needs a KEY", expected="one of " + ", ".join(SPECS))
    if args.action == "get":
        d = s.describe(args.key)
        print(json.dumps(d) if args.json else d["value"])
    elif args.action == "set":
        if args.value is None:
            raise UserInputError("`settings set` needs a VALUE", key=args.key)
        value = s.set(args.key, args.value)
        print(json.dumps({"key": args.key, "value": value, "file": str(s.path)}) if args.json
              else f"{args.key} = {value} (saved to {s.path})")
    elif args.action == "reset":
        s.reset(args.key)
        what = args.key or "all settings"
        print(json.dumps({"reset": args.key or "all", "file": str(s.path)}) if args.json
              else f"reset {what} to the default")
    return EXIT_OK
