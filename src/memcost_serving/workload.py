"""The serving study's workloads (notebook 06): synthetic conversations, and LoCoMo's subset."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.spatial.distance import jensenshannon

from memcost.io import write_parquet
from memcost.text import count_tokens, decode, encode

BLOCK_TURNS = 20  # turns generated at a time (Total Recall §3)
BAND_LOW, BAND_HIGH = 0.85, 1.15  # length control: pad below 0.85·L, cut above 1.15·L
WORKLOAD_COLUMNS = ("turn", "speaker", "text", "tokens", "line_tokens", "facts", "length_action")

PEOPLE = ("Maya", "Jonas", "Priya", "Tomás", "Aiko", "Lena", "Omar", "Grace", "Viktor", "Nadia")
RELATIVES = ("sister", "brother", "cousin", "aunt", "uncle", "neighbour", "colleague")
OTHER_NAMES = ("Anna", "Felix", "Rosa", "Kenji", "Ines", "Marco", "Chloe", "Dev", "Hugo", "Zara")
PETS = ("Biscuit", "Pepper", "Luna", "Miso", "Otto", "Juniper")
CITIES = ("Lisbon", "Porto", "Utrecht", "Kyoto", "Tallinn", "Valencia", "Ghent", "Bergen")
FOODS = ("ramen", "Thai green curry", "sourdough pizza", "falafel wraps", "paella", "pho")
ACTIVITIES = ("yoga", "climbing", "choir practice", "swimming", "pottery class", "Spanish lessons")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
JOBS = ("nurse", "data analyst", "carpenter", "teacher", "sound engineer", "architect")
COMPANIES = ("Northwind", "Bluefield Labs", "Harbour & Co", "Greenleaf", "Atlas Studio")
FREQUENCIES = ("once a week", "twice a week", "three times a week", "every other day")

# Each planted fact: (kind, template). Slots are filled from the lists above by the seed.
FACT_TEMPLATES = (
    ("relationship", "My {relative} {other} is moving to {city} on {day} {month}."),
    ("schedule", "I have {activity} every {weekday} at {hour} o'clock now."),
    ("schedule_change", "I switched my {activity} to {frequency} since last month."),
    ("preference", "My favourite food at the moment is {food}, I could eat it daily."),
    ("preference_change", "I have gone off {food} completely, I only want {food2} lately."),
    ("date", "Our dog {pet} turns {age} on {day} {month}, we are planning a small party."),
    ("work", "I started working at {company} as a {job} in {month} {year}."),
    ("name", "My friend {other} recommended a café called {pet} Corner near {city} station."),
    ("travel", "We booked a trip to {city} for the {day} of {month}, just the two of us."),
)
SMALL_TALK = (  # no first person, names or numbers: nothing here is a fact about anyone
    "That sounds really nice, honestly.",
    "The weather has been strange all week.",
    "Haha, that is so typical.",
    "Oh wow, that is a lot.",
    "Sounds like a long day.",
    "The train was late again, as usual.",
    "That kitchen sounds like hard work.",
    "Documentaries are the best way to end a day.",
    "Good luck with that.",
    "Sure, that makes sense.",
    "Time flies at the weekend.",
    "Anyway, tell me more about it.",
    "Nice, that sounds relaxing.",
    "Ouch, that does not sound fun.",
    "Cool, good to hear.",
    "Same here, more or less.",
)
FILLER = "Anyway, more on that later."  # what padding appends, as often as needed


@dataclass(frozen=True)
class Turn:
    """One message of a workload: who wrote it, its text and its o200k sizes."""

    turn: int  # 0-based position in the conversation
    speaker: str
    text: str
    tokens: int  # o200k tokens of ``text``
    line_tokens: int  # o200k tokens of ``render_line`` (what a history prompt carries)
    facts: tuple[str, ...]  # ids of the facts planted in this turn (``<kind>:<n>``)
    length_action: str  # "ok" | "cut" | "padded" (the length control)


def render_line(speaker: str, text: str) -> str:
    """A turn as history prompts carry it: one line ``<speaker>: <text>`` ending in a newline.

    Every line starts with a letter and ends with ``\\n``, so o200k never merges tokens across
    two lines: a history's token count is the sum of its lines' counts (the replay relies on it).
    """
    return f"{speaker}: {' '.join(text.split())}\n"


def length_band(mean_tokens: int) -> tuple[int, int]:
    """The smallest and largest token count a turn of a cell with mean ``L`` may have."""
    return int(round(BAND_LOW * mean_tokens)), int(round(BAND_HIGH * mean_tokens))


def control_length(text: str, mean_tokens: int) -> tuple[str, str]:
    """``(text, action)``: padded with filler below the band, cut to its top above it."""
    low, high = length_band(mean_tokens)
    action = "ok"
    n = count_tokens(text)
    if n < low:
        action = "padded"
        while n < low:
            text = f"{text} {FILLER}".strip()
            n = count_tokens(text)
    if n > high:
        action = "cut" if action == "ok" else action
        ids = encode(text)
        keep = high
        while count_tokens(decode(ids[:keep]).rstrip()) > high:  # re-tokenising may merge
            keep -= 1
        text = decode(ids[:keep]).rstrip()
    return text, action


def _fill(template: str, rng: random.Random) -> str:
    food, food2 = rng.sample(FOODS, 2)
    return template.format(
        relative=rng.choice(RELATIVES),
        other=rng.choice(OTHER_NAMES),
        city=rng.choice(CITIES),
        day=rng.randint(1, 28),
        month=rng.choice(MONTHS),
        activity=rng.choice(ACTIVITIES),
        weekday=rng.choice(WEEKDAYS),
        hour=rng.randint(6, 20),
        frequency=rng.choice(FREQUENCIES),
        food=food,
        food2=food2,
        pet=rng.choice(PETS),
        age=rng.randint(2, 14),
        company=rng.choice(COMPANIES),
        job=rng.choice(JOBS),
        year=rng.randint(2015, 2025),
    )


@lru_cache(maxsize=4096)
def _sentence_tokens(sentence: str) -> int:
    """Tokens a sentence adds to a turn (joined with a space); the turn itself is counted
    exactly afterwards, by the length control."""
    return count_tokens(" " + sentence)


def template_turn(
    rng: random.Random, mean_tokens: int, fact_no: int
) -> tuple[str, tuple[str, ...]]:
    """One turn's raw text (before length control) and the facts planted in it."""
    target = rng.uniform(0.9, 1.1) * mean_tokens
    sentences: list[str] = []
    facts: list[str] = []
    if rng.random() < 0.6:
        kind, template = rng.choice(FACT_TEMPLATES)
        sentences.append(_fill(template, rng))
        facts.append(f"{kind}:{fact_no}")
    previous, n = 0, sum(_sentence_tokens(x) for x in sentences)
    while n < target:
        if rng.random() < 0.05:
            kind, template = rng.choice(FACT_TEMPLATES)
            sentences.append(_fill(template, rng))
            facts.append(f"{kind}:{fact_no + len(facts)}")
        else:
            fresh = [x for x in SMALL_TALK if x not in sentences] or list(SMALL_TALK)
            sentences.append(rng.choice(fresh))
        previous, n = n, n + _sentence_tokens(sentences[-1])
    # stop at whichever side of the target is closer, so the mean length is L, not L + ½ sentence
    if len(sentences) > 1 and n - target > target - previous:
        last = sentences.pop()
        if facts and last not in SMALL_TALK:
            facts.pop()
    rng.shuffle(sentences)
    return " ".join(sentences), tuple(facts)


# (first turn, count, L, the two speakers, the last turns so far as rendered lines) -> texts
BlockGenerator = Callable[[int, int, int, Sequence[str], Sequence[str]], list[str]]
RECENT_TURNS = 4  # turns of context a block generator is shown


def speakers_for(seed: int) -> tuple[str, str]:
    rng = random.Random(f"speakers-{seed}")
    first, second = rng.sample(PEOPLE, 2)
    return first, second


def generate_workload(
    n_turns: int,
    mean_tokens: int,
    seed: int,
    *,
    block_generator: BlockGenerator | None = None,
) -> list[Turn]:
    """The conversation of cell ``(N, L)`` for ``seed``: deterministic, 20 turns at a time.

    ``block_generator(first_turn, count, L, speakers, recent_lines) -> texts`` replaces the
    templates (an LLM writing the block); its texts go through the same length control.
    """
    if n_turns < 1 or mean_tokens < 4:
        raise ValueError(f"a workload needs N >= 1 and L >= 4, got N={n_turns}, L={mean_tokens}")
    rng = random.Random(f"workload-{n_turns}-{mean_tokens}-{seed}")
    speakers = speakers_for(seed)
    turns: list[Turn] = []
    planted = 0
    for start in range(0, n_turns, BLOCK_TURNS):
        count = min(BLOCK_TURNS, n_turns - start)
        if block_generator is None:
            raw = []
            for _ in range(count):
                text, facts = template_turn(rng, mean_tokens, planted)
                planted += len(facts)
                raw.append((text, facts))
        else:
            recent = [render_line(t.speaker, t.text) for t in turns[-RECENT_TURNS:]]
            texts = block_generator(start, count, mean_tokens, speakers, recent)
            if len(texts) != count:
                raise ValueError(
                    f"the block generator returned {len(texts)} messages for "
                    f"turns {start}-{start + count - 1}, expected {count}"
                )
            raw = [(str(t), ()) for t in texts]
        for offset, (text, facts) in enumerate(raw):
            index = start + offset
            speaker = speakers[index % 2]
            text, action = control_length(text, mean_tokens)
            turns.append(
                Turn(
                    index,
                    speaker,
                    text,
                    count_tokens(text),
                    count_tokens(render_line(speaker, text)),
                    facts,
                    action,
                )
            )
    return turns


def workload_frame(turns: Sequence[Turn]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "turn": t.turn,
                "speaker": t.speaker,
                "text": t.text,
                "tokens": t.tokens,
                "line_tokens": t.line_tokens,
                "facts": list(t.facts),
                "length_action": t.length_action,
            }
            for t in turns
        ],
        columns=list(WORKLOAD_COLUMNS),
    )


def turns_from_frame(frame: pd.DataFrame) -> list[Turn]:
    return [
        Turn(
            int(r.turn),
            str(r.speaker),
            str(r.text),
            int(r.tokens),
            int(r.line_tokens),
            tuple(r.facts),
            str(r.length_action),
        )
        for r in frame.itertuples(index=False)
    ]


def workload_path(cache_dir: Path, n_turns: int, mean_tokens: int, seed: int, source: str) -> Path:
    return Path(cache_dir) / f"{source}_n{n_turns}_l{mean_tokens}_s{seed}.parquet"


def cached_workload(
    cache_dir: Path,
    n_turns: int,
    mean_tokens: int,
    seed: int,
    *,
    source: str = "template",
    block_generator: BlockGenerator | None = None,
) -> list[Turn]:
    """The workload of ``(N, L, seed)`` from ``cache_dir``, generated and written on first use."""
    path = workload_path(cache_dir, n_turns, mean_tokens, seed, source)
    if path.is_file():
        return turns_from_frame(pd.read_parquet(path))
    turns = generate_workload(n_turns, mean_tokens, seed, block_generator=block_generator)
    write_parquet(path, workload_frame(turns))
    return turns


def real_workload(turns: pd.DataFrame) -> list[Turn]:
    """A prepared conversation (notebook 00's ``conversations.parquet`` rows of one
    conversation, in order) as a workload: same rendering and counting as the synthetic ones."""
    out: list[Turn] = []
    for index, row in enumerate(turns.sort_values("position").itertuples(index=False)):
        text = " ".join(str(row.text or "").split()) or "(empty)"
        caption = getattr(row, "image_caption", None)
        if isinstance(caption, str) and caption:
            text = f"{text} [shares a photo: {caption}]"
        speaker = str(row.speaker or "user")
        out.append(
            Turn(
                index,
                speaker,
                text,
                count_tokens(text),
                count_tokens(render_line(speaker, text)),
                (),
                "real",
            )
        )
    return out


AXES = ("category", "evidence_turns", "evidence_span")
BINNING = {
    "category": "LoCoMo category number 1-4 (category 5, adversarial, left out)",
    "evidence_turns": "number of evidence dia_ids: 0, 1, 2, 3, 4+",
    "evidence_span": "sessions from first to last evidence turn: none, 1, 2, 3-5, 6+",
}
_SESSION = re.compile(r"D(\d+):")


def _turns_bin(n: int) -> str:
    return "4+" if n >= 4 else str(n)


def _span_bin(evidence: list[str]) -> str:
    sessions = [int(m.group(1)) for e in evidence for m in [_SESSION.match(str(e))] if m]
    if not sessions:
        return "none"
    span = max(sessions) - min(sessions) + 1
    return "6+" if span >= 6 else "3-5" if span >= 3 else str(span)


def question_axes(questions: pd.DataFrame) -> pd.DataFrame:
    """One row per question (category 5 dropped): ``conversation_id`` and its bin on each axis."""
    kept = questions[questions["category_id"].fillna(0).astype(int) != 5]
    evidence = kept["evidence"].apply(lambda e: [] if e is None else list(e))
    return pd.DataFrame(
        {
            "question_id": kept["question_id"].to_numpy(),
            "conversation_id": kept["conversation_id"].to_numpy(),
            "category": kept["category_id"].fillna(0).astype(int).astype(str).to_numpy(),
            "evidence_turns": evidence.apply(lambda e: _turns_bin(len(e))).to_numpy(),
            "evidence_span": evidence.apply(_span_bin).to_numpy(),
        }
    )


def divergence(part: pd.Series, whole: pd.Series) -> float:
    """Jensen–Shannon divergence (base 2) between two samples' bin frequencies."""
    bins = sorted(set(whole) | set(part))
    p = part.value_counts().reindex(bins, fill_value=0).to_numpy(float)
    q = whole.value_counts().reindex(bins, fill_value=0).to_numpy(float)
    return float(jensenshannon(p / p.sum(), q / q.sum(), base=2) ** 2)


@dataclass
class SubsetChoice:
    conversations: list[str]
    questions: int
    divergences: dict[str, float]
    total_divergence: float
    target_questions: int
    target_met: bool
    candidates: int
    available_conversations: int
    # the closest subset of the same size whatever its question count: the study imposes its
    # 665 questions as a filter, and the closest subset over all may have another count
    closest_conversations: list[str] = field(default_factory=list)
    closest_questions: int = 0
    closest_divergence: float = 0.0
    binning: dict[str, str] = field(default_factory=lambda: dict(BINNING))

    def as_dict(self) -> dict:
        return asdict(self)


def _closest(axes: pd.DataFrame, combos: Sequence[tuple[str, ...]]):
    """``(total divergence, combination, divergences per axis)`` of the combination closest to
    the whole set (ties go to the combination listed first)."""
    best: tuple[float, tuple[str, ...], dict[str, float]] | None = None
    for combo in combos:
        part = axes[axes["conversation_id"].isin(combo)]
        divs = {axis: divergence(part[axis], axes[axis]) for axis in AXES}
        total = float(np.sum(list(divs.values())))
        if best is None or total < best[0] - 1e-12:
            best = (total, combo, divs)
    assert best is not None
    return best


def choose_subset(
    questions: pd.DataFrame, *, size: int = 4, target_questions: int = 665
) -> SubsetChoice:
    """The subset of ``size`` conversations closest to the full set among those with
    ``target_questions`` questions (all of them when none has that many), and beside it the
    closest subset of that size whatever its question count."""
    axes = question_axes(questions)
    if axes.empty:
        raise ValueError("no LoCoMo questions outside category 5 to choose a subset from")
    counts = axes.groupby("conversation_id").size()
    ids = sorted(counts.index)
    k = min(size, len(ids))
    combos = list(itertools.combinations(ids, k))
    exact = [c for c in combos if int(counts.loc[list(c)].sum()) == target_questions]
    candidates = exact or combos
    total, combo, divs = _closest(axes, candidates)
    closest_total, closest, _ = _closest(axes, combos) if exact else (total, combo, divs)
    return SubsetChoice(
        list(combo),
        int(counts.loc[list(combo)].sum()),
        divs,
        total,
        target_questions,
        bool(exact),
        len(candidates),
        len(ids),
        list(closest),
        int(counts.loc[list(closest)].sum()),
        closest_total,
    )
