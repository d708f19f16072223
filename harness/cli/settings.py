"""`imprint settings list|get|set|reset`: list, get, set or reset the
research settings."""
from __future__ import annotations

import argparse
import json

from imprint_core.errors import UserInputError

from ..conventions import EXIT_OK
from .actions import options_either_side
from .console import console


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="the config file (default: $IMPRINT_CONFIG or the user config dir)")
    p.add_argument("--json", action="store_true")


def add_parser(sub: argparse._SubParsersAction) -> None:
    st = sub.add_parser("settings", help="list, get, set or reset the research settings",
                        description="Settings live in a TOML file (IMPRINT_CONFIG, or the user config dir); "
                                    "IMPRINT_CHAT_* environment variables override it.")
    options = options_either_side(st, _options)
    actions = st.add_subparsers(required=True, metavar="ACTION")
    actions.add_parser("list", parents=[options], help="every setting: value, source, default, bounds"
                       ).set_defaults(fn=list_settings)
    get = actions.add_parser("get", parents=[options], help="one setting's value")
    get.add_argument("key", nargs="?")   # checked by hand: a missing KEY is answered with the keys there are
    get.set_defaults(fn=get_setting)
    put = actions.add_parser("set", parents=[options], help="write one setting to the config file")
    put.add_argument("key", nargs="?")
    put.add_argument("value", nargs="?")
    put.set_defaults(fn=set_setting)
    reset = actions.add_parser("reset", parents=[options], help="back to the default: one setting, or all")
    reset.add_argument("key", nargs="?")
    reset.set_defaults(fn=reset_settings)


def _settings(args: argparse.Namespace):
    from imprint_core.settings import Settings
    return Settings(args.config)


def _key(args: argparse.Namespace, action: str) -> str:
    from imprint_core.settings import SPECS
    if not args.key:
        raise UserInputError(f"`settings {action}` needs a KEY", expected="one of " + ", ".join(SPECS))
    return args.key


def list_settings(args: argparse.Namespace) -> int:
    from imprint_core.settings import SPECS
    s = _settings(args)
    rows = s.list()
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
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


def get_setting(args: argparse.Namespace) -> int:
    s = _settings(args)
    d = s.describe(_key(args, "get"))
    print(json.dumps(d) if args.json else d["value"])
    return EXIT_OK


def set_setting(args: argparse.Namespace) -> int:
    s = _settings(args)
    key = _key(args, "set")
    if args.value is None:
        raise UserInputError("`settings set` needs a VALUE", key=key)
    value = s.set(key, args.value)
    print(json.dumps({"key": key, "value": value, "file": str(s.path)}) if args.json
          else f"{key} = {value} (saved to {s.path})")
    return EXIT_OK


def reset_settings(args: argparse.Namespace) -> int:
    s = _settings(args)
    s.reset(args.key)
    what = args.key or "all settings"
    print(json.dumps({"reset": args.key or "all", "file": str(s.path)}) if args.json
          else f"reset {what} to the default")
    return EXIT_OK
