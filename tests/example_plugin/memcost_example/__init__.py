"""An outside memory system: each user's most recent turns, verbatim, shown to every question.

It uses the core's interface alone (``memcost.memory.base``) and joins through the
``memcost.plugins`` entry point, as any published package would.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from memcost.io import read_json, write_json, write_parquet
from memcost.memory.base import ITEM_COLUMNS, MemorySystem, Recall, SystemBuild, system_dir
from memcost.plugins import Plugin
from memcost.text import count_tokens


class RecentTurns(MemorySystem):
    name = "recent_turns"
    answers_as = "memory_recent_turns"
    describes = "each user's most recent turns, verbatim (no model call, no search)"
    defaults = {"turns": 12}
    write_passes = 0.0  # the estimate: it writes without a model pass over the history
    write_update_phase = False

    @property
    def folder(self) -> Path:
        return system_dir(self.ds, self.name)

    @property
    def memory_files(self) -> list[Path]:
        return [self.folder / "items.parquet"]

    def build(self, client, conversations: pd.DataFrame) -> SystemBuild:
        t0 = time.perf_counter()
        rows = []
        for user, turns in conversations.groupby("conversation_id", sort=False):
            recent = turns.sort_values("position").tail(int(self.settings["turns"]))
            for turn in recent.iloc[::-1].itertuples():  # the newest first
                text = f"{turn.speaker}: {turn.text}"
                rows.append(
                    {
                        "conversation_id": str(user),
                        "item_id": f"{user}:t{turn.position}",
                        "kind": "turn",
                        "text": text,
                        "session_datetime": turn.session_datetime,
                        "score": None,
                        "tokens": count_tokens(text),
                        "positions": [int(turn.position)],
                        "valid": True,
                    }  # fmt: skip
                )
        write_parquet(self.folder / "items.parquet", pd.DataFrame(rows))
        users = conversations["conversation_id"].astype(str).unique().tolist()
        write_json(self.folder / "done.json", {u: {"settings": self.settings} for u in users})
        return SystemBuild(self.name, len(users), len(users), wall_s=time.perf_counter() - t0)

    def _items(self) -> pd.DataFrame:
        return pd.read_parquet(self.folder / "items.parquet")

    def items(self, user: str) -> pd.DataFrame:
        items = self._items()
        return items.loc[items["conversation_id"] == user].reset_index(drop=True)

    def recall(self, client, questions: pd.DataFrame) -> dict[str, Recall]:
        by_user = {u: g[list(ITEM_COLUMNS)] for u, g in self._items().groupby("conversation_id")}
        empty = pd.DataFrame(columns=list(ITEM_COLUMNS))
        return {
            str(q.question_id): Recall(by_user.get(str(q.conversation_id), empty), 0.0)
            for q in questions.itertuples()
        }

    def state(self) -> pd.DataFrame:
        built = read_json(self.folder / "done.json") if self.memory_files[0].is_file() else {}
        items = self._items() if built else pd.DataFrame(columns=["conversation_id", "tokens"])
        sizes = items.groupby("conversation_id")["tokens"].agg(["size", "sum"])
        return pd.DataFrame(
            {
                "conversation_id": list(built),
                "calls": 0,
                "items": [int(sizes["size"].get(u, 0)) for u in built],
                "tokens": [int(sizes["sum"].get(u, 0)) for u in built],
            }  # fmt: skip
        )


PLUGIN = Plugin(name="example", memory_systems=(RecentTurns,))
