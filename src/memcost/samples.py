"""Bundled samples: small synthetic benchmark files in each dataset's exact native layout.

``python -m memcost.samples`` (re)writes ``data/sample/``; the output depends only on the seed,
so running it again reproduces the committed files byte for byte (a test checks this).

The conversations are written to exercise what the study measures, at a size the whole
pipeline runs through in seconds:

- facts planted with dates (relative ones too: "last Sunday", "this Saturday"), so temporal
  questions need the session timestamps;
- a preference that changes later ("yoga twice a week" → "three times a week"), so some
  questions need the newer value and a stale memory answers them wrong;
- facts spread over two or three sessions that must be combined;
- small talk and unrelated assistant chats as distractors;
- questions of every category and type, with gold answers: LoCoMo 1-5 (adversarial ones
  with the trap in ``adversarial_answer``), all six LongMemEval types and abstention (``_abs``)
  with ``has_answer`` evidence turns, PersonaMem v2 queries with one correct and three
  incorrect options (one of them the user's *previous* preference where there is one).

Answers are specific (names, amounts, dates), so a system that finds the right turn beats one
that does not, and a no-context baseline can answer almost nothing.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from memcost.io import write_text
from memcost.paths import SAMPLE_DIR

SEED = 20_230_508  # any integer works; this one is what data/sample/ was written with

# --- Date formats and ids ------------------------------------------------------------------------


def locomo_datetime(moment: datetime) -> str:
    """LoCoMo's date format: ``1:56 pm on 8 May, 2023``."""
    hour = moment.hour % 12 or 12
    half = "am" if moment.hour < 12 else "pm"
    return f"{hour}:{moment.minute:02d} {half} on {moment.day} {moment:%B}, {moment.year}"


def longmemeval_datetime(moment: datetime) -> str:
    """LongMemEval's date format: ``2023/05/20 (Sat) 02:21``."""
    return f"{moment:%Y/%m/%d} ({moment:%a}) {moment:%H:%M}"


def day_text(day: date) -> str:
    """``7 May 2023``: how LoCoMo's gold answers write dates."""
    return f"{day.day} {day:%B} {day.year}"


def previous_weekday(day: date, weekday: int) -> date:
    """The last ``weekday`` (Monday = 0) strictly before ``day``."""
    delta = (day.weekday() - weekday) % 7 or 7
    return day - timedelta(days=delta)


def next_weekday(day: date, weekday: int) -> date:
    """The first ``weekday`` (Monday = 0) strictly after ``day``."""
    delta = (weekday - day.weekday()) % 7 or 7
    return day + timedelta(days=delta)


def _hex(rng: random.Random, n: int = 8) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


# --- LoCoMo --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One LoCoMo turn in a conversation script: speaker ``"a"`` or ``"b"``; a ``label`` lets
    questions cite it; ``fact`` is the observation LoCoMo's annotators would have written."""

    speaker: str
    text: str
    label: str = ""
    fact: str = ""
    caption: str = ""  # a shared photo, described as BLIP would
    query: str = ""  # the image-search query LoCoMo stores with a shared photo


@dataclass
class Script:
    """A LoCoMo conversation: two people, six sessions, and the questions about it."""

    sample_id: str
    speaker_a: str
    speaker_b: str
    start: date
    sessions: list[list[Turn]]
    questions: list[dict[str, Any]] = field(default_factory=list)


def _conv_maya_jonas() -> Script:
    t = Turn
    sessions = [
        [
            t("a", "Hey Jonas! It's been ages. How have you been?"),
            t("b", "Maya! Good to hear from you. Busy but good. I finally adopted a dog in "
                   "January.", "adopt", "Jonas adopted a dog in January 2023."),
            t("a", "No way! What kind of dog?"),
            t("b", "A beagle called Pretzel. He's three and has more energy than I do.", "dog",
              "Jonas's dog Pretzel is a three-year-old beagle."),
            t("a", "Beagles are the best. Pretzel is such a good name."),
            t("b", "He came with it, I couldn't bring myself to change it. What about you, "
                   "anything new?"),
            t("a", "I've started going to yoga twice a week at a little studio near my office. "
                   "It's really helping with my back.", "yoga1",
              "Maya goes to yoga twice a week at a studio near her office."),
            t("b", "That's great. Is it the hot yoga kind?"),
            t("a", "No, just regular vinyasa. The hot rooms make me dizzy."),
            t("b", "Fair enough. How's your sister doing?"),
            t("a", "Lena's good! She moved to Porto last autumn for a job at a design agency.",
              "sister", "Maya's sister Lena lives in Porto and works at a design agency."),
            t("b", "Porto is beautiful. You should visit her."),
            t("a", "That's the plan, hopefully this spring."),
        ],
        [
            t("b", "Quick update: I signed up for the Lisbon half marathon! It's in a few "
                   "weeks.", "marathon_signup", "Jonas signed up for the Lisbon half marathon."),
            t("a", "Wow, a half marathon! Have you run one before?"),
            t("b", "Never. I'm following a training plan with four runs a week."),
            t("a", "That's serious commitment."),
            t("b", "Pretzel comes along on the short runs, he loves it."),
            t("a", "I've been busy too. The library asked me to paint a mural for the children's "
                   "section.", "mural", "Maya is painting a mural for the library's children's "
                                        "section."),
            t("a", "Here's how far I've got.", "mural_photo",
              "Maya's library mural shows kingfishers and herons.",
              caption="a photo of a half painted mural of birds and reeds on a brick wall",
              query="mural kingfisher heron brick wall"),
            t("b", "That looks amazing! Are those kingfishers?"),
            t("a", "Yes! Kingfishers and herons, the river birds from around town."),
            t("b", "When will it be finished?"),
            t("a", "Hopefully in a couple of months, if I keep painting on weekends."),
        ],
        [
            t("a", "I just got back from Porto! I visited Lena last weekend.", "porto_visit",
              "Maya visited her sister Lena in Porto."),
            t("b", "How was it?"),
            t("a", "Wonderful. We took a boat trip on the Douro and ate far too many pasteis de "
                   "nata."),
            t("b", "Jealous. Did you see her new flat?"),
            t("a", "Yes, it overlooks the river. Tiny but gorgeous."),
            t("b", "Sounds perfect. Pretzel had a rough week though, he ate a sock and we ended "
                   "up at the vet.", "vet", "Pretzel swallowed a sock and had to see the vet."),
            t("a", "Oh no! Is he okay?"),
            t("b", "He's fine now, the vet said he was lucky. It cost me 240 euros though.",
              "vet_cost", "Pretzel's vet visit cost Jonas 240 euros."),
            t("a", "Ouch. Poor Pretzel."),
            t("b", "How's the yoga going?"),
            t("a", "Still going, still twice a week. My back feels so much better."),
        ],
        [
            t("b", "I did it! I ran the Lisbon half marathon last Sunday.", "marathon_done",
              "Jonas ran the Lisbon half marathon."),
            t("a", "Congratulations!! How did it go?"),
            t("b", "Finished in 1 hour 52 minutes. My legs are still sore.", "marathon_time",
              "Jonas finished the Lisbon half marathon in 1 hour 52 minutes."),
            t("a", "That's an amazing time for a first one."),
            t("b", "Thanks! What's new with you?"),
            t("a", "I upped my yoga to three times a week. I added a Saturday morning class.",
              "yoga2", "Maya now goes to yoga three times a week, including Saturday "
                       "mornings."),
            t("b", "Look at you! Is the back pain gone?"),
            t("a", "Mostly. I also do the breathing exercises at home now."),
            t("b", "I should try yoga for recovery."),
            t("a", "You should, there's a beginners' class on Thursdays."),
        ],
        [
            t("b", "I bought a camera! A used Fujifilm X-T2.", "camera",
              "Jonas bought a used Fujifilm X-T2 camera."),
            t("a", "Oh nice, what are you going to photograph?"),
            t("b", "Landscapes mostly. I'm planning a photography trip to the Azores in "
                   "August.", "azores_plan", "Jonas is planning a landscape photography trip "
                                             "to the Azores."),
            t("a", "The Azores! Lena went there last year and loved it."),
            t("a", "The mural is finished, by the way. The library is unveiling it on Friday.",
              "mural_done", "Maya finished the library mural; it is unveiled on a Friday."),
            t("b", "That's huge! Congrats. Can I come?"),
            t("a", "Of course. Bring Pretzel if they allow dogs, haha."),
            t("b", "I'll bring the camera instead."),
        ],
        [
            t("a", "Guess what, I adopted a cat! She's a grey tabby called Miso.", "cat",
              "Maya adopted a grey tabby cat named Miso."),
            t("b", "Miso! How are you two getting along?"),
            t("a", "Slowly. She's very shy and hides under the sofa most of the day."),
            t("b", "I booked my flights to the Azores, I fly out on 12 August.", "azores_booked",
              "Jonas flies to the Azores on 12 August 2023."),
            t("a", "Exciting! How long are you going for?"),
            t("b", "Ten days. I'm renting a car to drive around Sao Miguel."),
            t("a", "Don't forget to send me pictures this time."),
            t("b", "I promise. How's the yoga?"),
            t("a", "Still three times a week, I'm hooked."),
        ],
    ]
    return Script("conv-1", "Maya", "Jonas", date(2023, 3, 1), sessions)


def _conv_priya_tom() -> Script:
    t = Turn
    sessions = [
        [
            t("b", "Priya! How are things at the hospital?"),
            t("a", "Hectic as ever. I'm a nurse at St Mary's, and next month I'm switching to "
                   "night shifts.", "nights", "Priya is a nurse at St Mary's hospital and is "
                                              "moving to night shifts."),
            t("b", "Nights! How do you feel about that?"),
            t("a", "Nervous, honestly. The pay is better but I love my sleep."),
            t("b", "I have news too: I'm finally opening my own bakery. It's called Crumb & Co, "
                   "on Elm Street.", "bakery", "Tom is opening a bakery called Crumb & Co on "
                                              "Elm Street."),
            t("a", "Tom, that's fantastic! You've talked about this for years."),
            t("b", "I know! Ava keeps asking if she can be the taste tester."),
            t("a", "How old is she now?"),
            t("b", "Five, she turns six in a couple of months.", "ava_age",
              "Tom's daughter Ava is five and turns six soon."),
        ],
        [
            t("b", "The bakery opened last Saturday!", "opened", "Crumb & Co opened on a "
                                                                 "Saturday."),
            t("a", "Congratulations! How was the first week?"),
            t("b", "Mad. We sold out of cardamom buns by ten every morning. They're our best "
                   "seller.", "buns", "Cardamom buns are the best seller at Crumb & Co."),
            t("a", "I need to try one."),
            t("b", "I'll save you some. What's new with you?"),
            t("a", "I've started learning Spanish. We're planning a trip to Valencia in "
                   "September.", "spanish", "Priya is learning Spanish for a September trip to "
                                            "Valencia."),
            t("b", "Nice! Duolingo?"),
            t("a", "Duolingo plus an evening class on Wednesdays."),
        ],
        [
            t("a", "First two weeks of night shifts done. I'm a zombie.", "nights_started",
              "Priya has started working night shifts."),
            t("b", "Are you sleeping at all?"),
            t("a", "Badly. I bought blackout curtains, which helps a bit.", "curtains",
              "Priya bought blackout curtains to sleep during the day."),
            t("b", "Ava had her school play yesterday. She played a tree!", "play",
              "Ava played a tree in her school play."),
            t("b", "Look at her.", "play_photo", "Ava wore a tree costume in the school play.",
              caption="a photo of a small girl in a green tree costume on a school stage",
              query="girl tree costume school play"),
            t("a", "Oh my goodness, the most serious tree I have ever seen."),
            t("b", "She took it very seriously. Not a single leaf moved."),
        ],
        [
            t("b", "Big step: I hired my first employee, Sam. He's a pastry chef from Lyon.",
              "hire", "Tom hired Sam, a pastry chef from Lyon, as his first employee."),
            t("a", "A French pastry chef! The croissants are going to be unreal."),
            t("b", "That's the plan. How's the Spanish going?"),
            t("a", "Funny you ask. We changed the trip to Sicily, so I switched to learning "
                   "Italian.", "italian", "Priya switched from Spanish to Italian because her "
                                          "trip changed from Valencia to Sicily."),
            t("b", "Ha! Ciao then."),
            t("a", "Ciao! Still September, just a different island of lemons."),
        ],
        [
            t("b", "Ava's sixth birthday party is this Saturday at the bakery. You're invited!",
              "party", "Ava's sixth birthday party is at the bakery on a Saturday."),
            t("a", "I wouldn't miss it. What's the theme?"),
            t("b", "Unicorns, obviously. Sam is making a three-tier unicorn cake."),
            t("a", "Lucky girl. I have news too: I got promoted to charge nurse!", "promotion",
              "Priya was promoted to charge nurse."),
            t("b", "Priya! That's brilliant. Does that mean fewer night shifts?"),
            t("a", "Sadly no, but I get to run the ward on nights."),
        ],
        [
            t("b", "The local paper named Crumb & Co best new bakery in town!", "award",
              "Crumb & Co won best new bakery from the local paper."),
            t("a", "That's amazing, you deserve it."),
            t("b", "Sam's croissants did a lot of the work. How's the Italian?"),
            t("a", "Good! My teacher thinks I'm ready for the A1 exam before the trip.",
              "exam", "Priya's Italian teacher thinks she is ready for the A1 exam."),
            t("b", "In bocca al lupo!"),
            t("a", "Crepi! See, I'm learning."),
        ],
    ]
    return Script("conv-2", "Priya", "Tom", date(2023, 2, 1), sessions)


# Small talk inserted at the end of some sessions: distractors that mention nothing asked about.
_SMALL_TALK = [
    [("a", "Ugh, it's been raining all week here."),
     ("b", "Same here, I've forgotten what the sun looks like.")],
    [("b", "Have you watched anything good lately?"),
     ("a", "A documentary about octopuses. Weirdly moving!")],
    [("a", "I tried the new ramen place downtown yesterday."),
     ("b", "Any good? I'm always looking for a decent ramen spot.")],
    [("b", "Work has been hectic, we're short two people on my team."),
     ("a", "That sounds exhausting, I hope it calms down soon.")],
    [("a", "My neighbour has started learning the trumpet. At seven in the morning."),
     ("b", "Oh no. That's rough.")],
    [("b", "I finally fixed the squeaky door in my hallway."),
     ("a", "The small victories!")],
    [("a", "Anyway, I should go and make dinner. Talk soon!"),
     ("b", "Talk soon, take care!")],
]


def _locomo_times(rng: random.Random, start: date, n: int) -> list[datetime]:
    moments = []
    day = start + timedelta(days=rng.randint(0, 9))
    for _ in range(n):
        hour = rng.choice([9, 10, 11, 13, 14, 16, 17, 19, 20])
        moments.append(datetime.combine(day, time(hour, rng.randrange(0, 60))))
        day += timedelta(days=rng.randint(10, 17))
    return moments


def _build_locomo_sample(script: Script, rng: random.Random) -> dict[str, Any]:
    names = {"a": script.speaker_a, "b": script.speaker_b}
    moments = _locomo_times(rng, script.start, len(script.sessions))
    conversation: dict[str, Any] = {"speaker_a": script.speaker_a, "speaker_b": script.speaker_b}
    dia: dict[str, str] = {}
    facts: dict[str, tuple[str, str]] = {}  # label -> (speaker, fact)
    observation: dict[str, Any] = {}
    session_summary: dict[str, str] = {}
    event_summary: dict[str, Any] = {}
    talk = list(_SMALL_TALK)
    rng.shuffle(talk)
    for s, (turns, moment) in enumerate(zip(script.sessions, moments, strict=True), start=1):
        lines = list(turns)
        if rng.random() < 0.7 and talk:
            lines += [Turn(speaker, text) for speaker, text in talk.pop()]
        records = []
        session_obs: dict[str, list[list[str]]] = {script.speaker_a: [], script.speaker_b: []}
        for k, turn in enumerate(lines, start=1):
            dia_id = f"D{s}:{k}"
            record: dict[str, Any] = {"speaker": names[turn.speaker], "dia_id": dia_id,
                                      "text": turn.text}
            if turn.caption:
                # LoCoMo's photo turns: image URL(s), BLIP caption, the search query used
                record = {"speaker": names[turn.speaker],
                          "img_url": [f"https://example.org/locomo-sample/{script.sample_id}/"
                                      f"{dia_id.replace(':', '_')}.jpg"],
                          "blip_caption": turn.caption, "query": turn.query,
                          "dia_id": dia_id, "text": turn.text}
            records.append(record)
            if turn.label:
                dia[turn.label] = dia_id
            if turn.fact:
                facts[turn.label] = (names[turn.speaker], turn.fact)
                session_obs[names[turn.speaker]].append([turn.fact, dia_id])
        conversation[f"session_{s}_date_time"] = locomo_datetime(moment)
        conversation[f"session_{s}"] = records
        observation[f"session_{s}_observation"] = session_obs
        said = [fact for pair in session_obs.values() for fact, _ in pair]
        session_summary[f"session_{s}_summary"] = (
            f"{script.speaker_a} and {script.speaker_b} talked on {day_text(moment.date())}. "
            + " ".join(said))
        event_summary[f"events_session_{s}"] = {
            script.speaker_a: [f for f, _ in session_obs[script.speaker_a]],
            script.speaker_b: [f for f, _ in session_obs[script.speaker_b]],
            "date": f"{moment.day} {moment:%B}, {moment.year}",
        }
    days = [m.date() for m in moments]
    qa = [_locomo_qa(q, dia) for q in _locomo_questions(script.sample_id, days)]
    return {"qa": qa, "conversation": conversation, "event_summary": event_summary,
            "observation": observation, "session_summary": session_summary,
            "sample_id": script.sample_id}


def _locomo_qa(spec: dict[str, Any], dia: dict[str, str]) -> dict[str, Any]:
    evidence = [dia[label] for label in spec["evidence"]]
    item: dict[str, Any] = {"question": spec["question"]}
    if spec["category"] == 5:
        # As in the public file: no 'answer', the trap in 'adversarial_answer'; one item keeps
        # its evidence as a printed list (a quirk of the real file the loader must absorb).
        item["evidence"] = str(evidence) if spec.get("evidence_as_text") else evidence
        item["category"] = 5
        item["adversarial_answer"] = spec["adversarial_answer"]
    else:
        item["answer"] = spec["answer"]
        item["evidence"] = evidence
        item["category"] = spec["category"]
    return item


def _locomo_questions(sample_id: str, days: list[date]) -> list[dict[str, Any]]:
    """The questions about one conversation; dates in answers follow the session dates."""

    def q(category: int, question: str, answer: Any, *evidence: str, **more: Any) -> dict:
        key = "adversarial_answer" if category == 5 else "answer"
        return {"category": category, "question": question, key: answer,
                "evidence": list(evidence), **more}

    if sample_id == "conv-1":
        race = previous_weekday(days[3], 6)
        unveiling = next_weekday(days[4], 4)
        return [
            q(4, "What breed is Jonas's dog?", "A beagle", "dog"),
            q(4, "Where does Maya's sister Lena live?", "Porto", "sister"),
            q(4, "What camera did Jonas buy?", "A used Fujifilm X-T2", "camera"),
            q(4, "What is the name of Maya's cat?", "Miso", "cat"),
            q(4, "How much did Pretzel's vet visit cost?", "240 euros", "vet_cost"),
            q(4, "What birds are painted on Maya's library mural?", "Kingfishers and herons",
              "mural_photo"),
            q(4, "How many times a week does Maya go to yoga now?", 3, "yoga2"),
            q(2, "When did Maya visit her sister in Porto?",
              f"The weekend before {day_text(days[2])}", "porto_visit"),
            q(2, "When did Jonas run the Lisbon half marathon?", day_text(race),
              "marathon_done"),
            q(2, "When is the library unveiling Maya's mural?", day_text(unveiling),
              "mural_done"),
            q(2, "When does Jonas fly to the Azores?", "12 August 2023", "azores_booked"),
            q(2, "When did Jonas adopt Pretzel?", "January 2023", "adopt"),
            q(1, "What pets do Jonas and Maya have?",
              "Jonas has a beagle named Pretzel and Maya has a grey tabby cat named Miso",
              "dog", "cat"),
            q(1, "How did Maya's yoga routine change over the spring?",
              "She went from twice a week to three times a week, adding a Saturday class",
              "yoga1", "yoga2"),
            q(1, "Which two Portuguese cities did Maya and Jonas travel to?",
              "Porto (Maya) and Lisbon (Jonas)", "porto_visit", "marathon_done"),
            q(3, "Would Jonas enjoy a landscape photography workshop?",
              "Likely yes; he bought a camera to photograph landscapes and planned a "
              "photography trip to the Azores", "camera", "azores_plan"),
            q(5, "What breed is Maya's dog?", "A beagle", "dog"),
            q(5, "How long did it take Maya to finish the Lisbon half marathon?",
              "1 hour 52 minutes", "marathon_time"),
            q(5, "What is the name of Jonas's cat?", "Miso", "cat"),
        ]
    opened = previous_weekday(days[1], 5)
    party = next_weekday(days[4], 5)
    return [
        q(4, "What is the name of Tom's bakery?", "Crumb & Co", "bakery"),
        q(4, "What is the best-selling item at Tom's bakery?", "Cardamom buns", "buns"),
        q(4, "Who was the first employee Tom hired?", "Sam, a pastry chef from Lyon", "hire"),
        q(4, "What role did Ava play in her school play?", "A tree", "play"),
        q(4, "What did Priya buy to help her sleep during the day?", "Blackout curtains",
          "curtains"),
        q(4, "How old did Ava turn at her birthday party?", 6, "party"),
        q(2, "When did Tom's bakery open?", day_text(opened), "opened"),
        q(2, "When was Ava's sixth birthday party?", day_text(party), "party"),
        q(1, "Which language is Priya learning now, and why did she change?",
          "Italian; her trip changed from Valencia to Sicily, so she switched from Spanish",
          "spanish", "italian"),
        q(1, "What changes happened in Priya's nursing job this year?",
          "She moved to night shifts and was promoted to charge nurse", "nights", "promotion"),
        q(3, "Would Priya appreciate an Italian phrasebook as a gift?",
          "Likely yes; she is learning Italian for a trip to Sicily", "italian"),
        q(5, "What is the name of Priya's bakery?", "Crumb & Co", "bakery",
          evidence_as_text=True),
        q(5, "Which hospital does Tom work at?", "St Mary's", "nights"),
        q(5, "What role did Priya's daughter play in the school play?", "A tree", "play"),
    ]


def build_locomo(rng: random.Random) -> list[dict[str, Any]]:
    return [_build_locomo_sample(s, rng) for s in (_conv_maya_jonas(), _conv_priya_tom())]


# --- LongMemEval ---------------------------------------------------------------------------------

# Unrelated assistant chats (LongMemEval fills haystacks with ShareGPT and UltraChat sessions).
_FILLERS: list[tuple[str, list[tuple[str, str]]]] = [
    ("sharegpt_Xk2pQ7r_0", [
        ("user", "How do I get a red wine stain out of a wool carpet?"),
        ("assistant", "Act quickly and blot, don't rub. Press a clean white cloth onto the stain "
                      "to lift as much wine as possible. Then mix a tablespoon of washing-up "
                      "liquid and a tablespoon of white vinegar into two cups of warm water, "
                      "sponge it on, and keep blotting with a dry cloth. Rinse with cold water "
                      "and blot dry. Avoid hot water and bleach: heat sets the stain and bleach "
                      "damages wool."),
        ("user", "What if it's already dry?"),
        ("assistant", "Dampen it with warm water first to loosen it, then use the same "
                      "solution. A paste of baking soda and water left for an hour can lift "
                      "the last traces; vacuum it up once dry."),
    ]),
    ("ultrachat_214876", [
        ("user", "Can you explain the difference between TCP and UDP in simple terms?"),
        ("assistant", "TCP is like a phone call: a connection is set up first, every piece of "
                      "data is numbered, lost pieces are sent again and everything arrives in "
                      "order. UDP is like posting postcards: each message is sent on its own, "
                      "with no delivery guarantee and no ordering, but with much less overhead. "
                      "Web pages and email use TCP; video calls and online games often use UDP "
                      "because a late packet is worse than a lost one."),
    ]),
    ("sharegpt_m4JvT1c_1", [
        ("user", "Write a short poem about the first frost of autumn."),
        ("assistant", "The garden wakes in silver lace,\nEach leaf a tiny frozen face;\nThe "
                      "pumpkins wear a crystal shawl,\nAnd breath hangs heavy over all.\nBy noon "
                      "the sun will melt the spell,\nBut for an hour the world is still."),
        ("user", "Nice! Can you make it rhyme less obviously?"),
        ("assistant", "Silver settles on the lawn overnight,\nleaves stiffen into glass,\nthe "
                      "last tomatoes hold their breath.\nBy noon the sun takes it all back,\n"
                      "as if the cold had only been a rumour."),
    ]),
    ("ultrachat_98342", [
        ("user", "What's a simple beginner strength routine I can do at home with two "
                 "dumbbells?"),
        ("assistant", "Try three sessions a week, two or three sets of 8-12 reps each: goblet "
                      "squats, dumbbell rows, floor presses, Romanian deadlifts, overhead "
                      "presses and a plank to finish. Pick a weight where the last two reps of "
                      "each set are hard but clean, and add weight or reps when all sets feel "
                      "easy. Rest a day between sessions."),
    ]),
    ("sharegpt_Qa81LzE_0", [
        ("user", "How long should I boil an egg for a jammy yolk?"),
        ("assistant", "Lower a fridge-cold large egg into already boiling water and cook it "
                      "for six and a half minutes, then move it straight into iced water for a "
                      "couple of minutes. The white will be set and the yolk thick and jammy. "
                      "Six minutes gives a runnier yolk, seven and a half a fudgy one."),
    ]),
    ("ultrachat_305511", [
        ("user", "Why is Canberra the capital of Australia instead of Sydney?"),
        ("assistant", "When the colonies federated in 1901, Sydney and Melbourne both wanted to "
                      "be the capital. The compromise, written into the constitution, was a new "
                      "city in New South Wales but at least 100 miles from Sydney. The site was "
                      "chosen in 1908, Walter Burley Griffin and Marion Mahony Griffin won the "
                      "design competition, and Parliament moved there in 1927; Melbourne served "
                      "as the temporary seat until then."),
    ]),
    ("sharegpt_Tp09wWn_2", [
        ("user", "Summarise the plot of Pride and Prejudice in three sentences."),
        ("assistant", "Elizabeth Bennet, the sharp-witted second of five daughters, takes an "
                      "instant dislike to the proud and wealthy Mr Darcy. Misunderstandings, "
                      "Wickham's lies and Darcy's clumsy first proposal keep them apart, until "
                      "a letter and his quiet help in rescuing her sister Lydia reveal his true "
                      "character. Both overcome their pride and prejudice, and they marry."),
    ]),
    ("ultrachat_177204", [
        ("user", "Help me write a polite email asking my manager for a one-week deadline "
                 "extension on a report."),
        ("assistant", "Subject: Request for a short extension on the quarterly report\n\nHi "
                      "Sarah,\n\nI'm writing to ask whether the deadline for the quarterly "
                      "report could move from Friday to next Friday. The data from the regional "
                      "teams arrived later than planned, and I'd like the extra time to check it "
                      "properly rather than rush the analysis. I can share a draft of the "
                      "finished sections by Wednesday if that helps.\n\nThank you for "
                      "considering it,\nAlex"),
    ]),
    ("sharegpt_bN6sYhD_0", [
        ("user", "How can I keep a basil plant alive on a windowsill?"),
        ("assistant", "Give it the sunniest window you have, at least six hours of light. "
                      "Water when the top centimetre of soil is dry, in the morning, and never "
                      "let the pot stand in water. Pinch off the top pair of leaves above a "
                      "node to make it bushy, and remove flower buds as soon as they appear. "
                      "Supermarket pots are several plants crammed together: splitting them "
                      "into two or three pots helps a lot."),
    ]),
    ("ultrachat_441290", [
        ("user", "What are some good icebreaker questions for a team meeting?"),
        ("assistant", "A few that work well with colleagues: What's a small thing that made "
                      "your week better? Which skill would you learn instantly if you could? "
                      "What was your first job? What's a place you'd recommend everyone visit "
                      "once? What's the best piece of advice you've been given at work? Keep "
                      "it to one question and a minute per person."),
    ]),
    ("sharegpt_Hh3c8Ks_1", [
        ("user", "Explain compound interest with an example."),
        ("assistant", "Compound interest is interest earned on interest. Put 1,000 in an "
                      "account paying 5% a year: after one year you have 1,050. In year two "
                      "the 5% is paid on 1,050, giving 1,102.50, and so on. After ten years "
                      "you have about 1,629, compared with 1,500 if interest were only paid "
                      "on the original 1,000."),
    ]),
    ("ultrachat_62018", [
        ("user", "What's the difference between baking soda and baking powder?"),
        ("assistant", "Baking soda is pure sodium bicarbonate: it needs an acid in the recipe "
                      "(buttermilk, yoghurt, lemon juice, brown sugar) to produce carbon "
                      "dioxide. Baking powder is baking soda with the acid already mixed in, "
                      "plus a starch to keep it dry, so it works with neutral ingredients. "
                      "Soda is about three to four times stronger, so they are not "
                      "interchangeable one for one."),
    ]),
]


@dataclass(frozen=True)
class Evidence:
    """An evidence session of a LongMemEval question: ``day`` counts from the first one;
    turns are ``(role, text, has_answer)``."""

    day: int
    turns: tuple[tuple[str, str, bool], ...]


def _u(text: str, answer: bool = False) -> tuple[str, str, bool]:
    return ("user", text, answer)


def _a(text: str, answer: bool = False) -> tuple[str, str, bool]:
    return ("assistant", text, answer)


_LONGMEMEVAL_QUESTIONS: list[dict[str, Any]] = [
    {
        "type": "single-session-user",
        "question": "Which bakery did I order my sister's birthday cake from?",
        "answer": "Rosie's Bakery",
        "evidence": [Evidence(0, (
            _u("I'm organising a surprise party for my sister Hannah's 30th this Saturday. I've "
               "already ordered the cake from Rosie's Bakery on Main Street, a lemon drizzle, "
               "her favourite. Could you help me with ideas for table decorations?", True),
            _a("What a lovely surprise! Since the cake is lemon drizzle, you could build a "
               "fresh yellow-and-white theme: lemon slices in glass jars of water as "
               "centrepieces, white tablecloths with yellow napkins, and a few bunches of "
               "daisies. Fairy lights along the table make evening photos look great, and a "
               "small display of photos of Hannah at different ages is a nice personal touch."),
            _u("Love the lemon jars idea. How many would I need for a table of twelve?"),
            _a("For a long table seating twelve, three or four jars spaced evenly are enough to "
               "tie the theme together without crowding the plates. Add a couple of tea lights "
               "between them for warmth."),
        ))],
    },
    {
        "type": "single-session-assistant",
        "question": "In the Kyoto itinerary you suggested, which shrine did you tell me to visit "
                    "at around 7 am on the first day?",
        "answer": "Fushimi Inari Shrine",
        "evidence": [Evidence(0, (
            _u("I'm going to Kyoto for three days in October. Can you suggest an itinerary that "
               "avoids the worst crowds?"),
            _a("Here's a plan that dodges the peak crowds.\n\nDay 1: Start at Fushimi Inari "
               "Shrine around 7 am, before the tour groups arrive, and walk up past the first "
               "torii tunnels. In the afternoon, wander through Higashiyama to Kiyomizu-dera.\n"
               "Day 2: Go to the Arashiyama bamboo grove early, then visit Tenryu-ji and take "
               "the Sagano scenic railway.\nDay 3: Spend the morning at Kinkaku-ji, then walk "
               "the Philosopher's Path to Nanzen-ji. For dinner, try the small restaurants "
               "along Pontocho alley.", True),
            _u("Perfect, thanks! Is a Japan Rail Pass worth it for this trip?"),
            _a("Probably not for three days inside Kyoto: most sights are reached by city bus, "
               "subway or the Keihan and Randen lines. A prepaid IC card such as ICOCA is "
               "simpler."),
        ))],
    },
    {
        "type": "single-session-preference",
        "question": "Can you recommend something I could cook for dinner tonight?",
        "answer": "The user would prefer quick vegetarian recipes (about 30 minutes or less) "
                  "with a spicy kick, ideally Thai-inspired dishes such as a green or red curry "
                  "with tofu or vegetables. They would not prefer meat or fish dishes, bland "
                  "food, or recipes that take a long time to prepare.",
        "evidence": [Evidence(0, (
            _u("I've been vegetarian for about five years and I'm getting bored of my usual "
               "pasta dishes. I love spicy food, Thai green curry is my all-time favourite, but "
               "on weeknights I only have about 30 minutes to cook. Any ideas?", True),
            _a("Here are some quick, spicy vegetarian options: a 20-minute Thai red curry with "
               "chickpeas and spinach, crispy chilli tofu with broccoli, or spicy peanut noodles "
               "with edamame. Keep a jar of good curry paste and a tin of coconut milk in the "
               "cupboard and most of these come together in under half an hour."),
            _u("The chilli tofu sounds great. Can I use tofu from the freezer?"),
            _a("Yes, frozen and thawed tofu gets chewier and soaks up sauce better. Press out "
               "the water before cooking."),
        ))],
    },
    {
        "type": "temporal-reasoning",
        "question": "How many days passed between my first pottery class and the day I glazed "
                    "my first bowl?",
        "answer": "17 days. 18 days (including the last day) is also acceptable.",
        "evidence": [
            Evidence(0, (
                _u("I just got home from my very first pottery class today! We learned to "
                   "centre clay on the wheel. Any tips for keeping my hands steady?", True),
                _a("Congratulations on your first class! Brace your elbows against your thighs "
                   "or the splash pan, keep your hands wet but not dripping, and let the wheel "
                   "do the work at a steady medium speed. Centring is the hardest skill at "
                   "first; it gets easier within a few sessions."),
            )),
            Evidence(17, (
                _u("Exciting news: today I glazed the first bowl I made in my pottery class! "
                   "Which glaze colours look good on a speckled stoneware body?", True),
                _a("Speckled stoneware looks lovely under semi-transparent glazes that let the "
                   "iron specks show through: a celadon green, a honey amber or a satin white. "
                   "Opaque glazes hide the speckle, so use them only if you want a solid "
                   "colour."),
            )),
        ],
    },
    {
        "type": "knowledge-update",
        "question": "How many times a week do I go to yoga these days?",
        "answer": "Three times a week",
        "evidence": [
            Evidence(0, (
                _u("I go to yoga twice a week at a studio near my office, usually on Tuesdays "
                   "and Thursdays. Can you suggest some stretches for tight hamstrings that I "
                   "can do at home on the other days?", True),
                _a("Good ones for tight hamstrings: a supine hamstring stretch with a strap, "
                   "a standing forward fold with bent knees, pyramid pose with blocks, and "
                   "legs up the wall for a few minutes to finish. Hold each for 30-60 seconds "
                   "and breathe slowly; never bounce."),
            )),
            Evidence(45, (
                _u("Quick update on my routine: I've increased my yoga to three times a week "
                   "now that I have Friday mornings free. Can you help me plan a balanced week "
                   "with some light cardio too?", True),
                _a("Here's a balanced week: yoga on Tuesday, Thursday and Friday morning; brisk "
                   "30-minute walks or easy cycling on Monday and Wednesday; a longer walk or "
                   "swim on Saturday; and Sunday as a full rest day."),
            )),
        ],
    },
    {
        "type": "multi-session",
        "question": "How much did I spend in total on the camping gear I told you about?",
        "answer": "$335",
        "evidence": [
            Evidence(0, (
                _u("I just bought a new two-person tent for $180 for my camping trip to the "
                   "Lake District next month. How do I seal the seams?", True),
                _a("Set the tent up in dry weather, turn the fly inside out and run a "
                   "seam sealer suited to the fabric (silicone for silnylon, polyurethane for "
                   "PU-coated polyester) along every stitched seam. Let it cure for a day "
                   "before packing."),
            )),
            Evidence(9, (
                _u("I picked up a down sleeping bag yesterday for $95. How should I store it "
                   "so the down doesn't get crushed?", True),
                _a("Store it loose in the large cotton or mesh storage sack it came with, or "
                   "hang it in a wardrobe. Only use the small compression sack on the trip "
                   "itself; long-term compression damages the loft."),
            )),
            Evidence(20, (
                _u("Last purchase for the trip: a small camping stove for $60. Is it safe to "
                   "use it in the tent porch if it rains?", True),
                _a("It's risky: stoves produce carbon monoxide and can set the fabric alight. "
                   "If you must, keep the porch fully open, the stove on a stable base well "
                   "away from the fabric, and never cook inside the sleeping area."),
            )),
        ],
    },
    {
        "type": "temporal-reasoning",
        "question": "Which did I start first, the book club or my cello lessons?",
        "answer": "The book club",
        "evidence": [
            Evidence(0, (
                _u("I joined a neighbourhood book club last week; our first pick is The "
                   "Remains of the Day. Any discussion questions I could bring?", True),
                _a("A few: How reliable is Stevens as a narrator? What does he mean by "
                   "dignity, and does his idea change? Which moments show what he will not "
                   "admit about Miss Kenton? Is loyalty to Lord Darlington a virtue here?"),
            )),
            Evidence(26, (
                _u("I started cello lessons today! My teacher says my bow hold is too tense. "
                   "How can I relax it?", True),
                _a("Think of holding the bow as if it were a small bird: curved fingers, a bent "
                   "thumb opposite the middle finger, and the weight of the arm sinking into "
                   "the string instead of squeezing. Practise open strings slowly in front of a "
                   "mirror."),
            )),
        ],
    },
    {
        "type": "knowledge-update",
        "question": "Where does my brother Daniel work now?",
        "answer": "At a renewable energy startup in Bristol",
        "evidence": [
            Evidence(0, (
                _u("My brother Daniel works as a financial analyst at a bank in Leeds and he's "
                   "thinking about a career change. What questions should he ask himself "
                   "before switching?", True),
                _a("Some useful ones: What exactly do I want to leave behind, and what do I "
                   "want more of? Which of my skills transfer? Can I try the new field on a "
                   "small scale first? How long could I manage on a lower salary while I "
                   "retrain?"),
            )),
            Evidence(38, (
                _u("Update: Daniel actually made the jump. He just started a new job at a "
                   "renewable energy startup in Bristol! What's a thoughtful congratulations "
                   "gift under 40 pounds?", True),
                _a("A good notebook and pen for his first weeks, a guidebook to Bristol's "
                   "best cafes, a plant for his new desk, or a nice travel mug for the "
                   "commute."),
            )),
        ],
    },
    {
        "type": "multi-session",
        "question": "How many books have I told you I finished reading?",
        "answer": 3,
        "evidence": [
            Evidence(0, (
                _u("I just finished reading Piranesi and loved the atmosphere. Can you "
                   "recommend something similar?", True),
                _a("If you liked the dreamlike, labyrinthine mood, try Jonathan Strange & Mr "
                   "Norrell by the same author, The Night Circus, or Borges' Labyrinths."),
            )),
            Evidence(14, (
                _u("Finished Tomorrow, and Tomorrow, and Tomorrow on the train today. What a "
                   "ride. What should I read next that's about friendship?", True),
                _a("Try A Little Life if you want something intense, The Secret History for "
                   "friendship gone dark, or My Brilliant Friend for a lifelong friendship."),
            )),
            Evidence(33, (
                _u("I've just finished The Overstory. It made me want to plant a tree. Which "
                   "trees grow well in a small garden?", True),
                _a("Small gardens suit rowan, crab apple, Amelanchier (juneberry), field maple "
                   "kept pruned, or a Japanese maple in a sheltered spot."),
            )),
        ],
    },
    {
        "type": "single-session-user",
        "abstention": True,
        "question": "What is the name of my cat?",
        "answer": "The information provided is not enough. You mentioned your dog Biscuit, a "
                  "corgi, but never a cat.",
        "evidence": [Evidence(0, (
            _u("My dog Biscuit, a corgi, has started barking at the postman every morning. How "
               "can I train him to stay calm?", True),
            _a("Start by desensitising him: play recordings of footsteps and the letterbox at "
               "a low volume while he gets treats, then slowly raise the volume over days. "
               "When the postman comes, call him to a mat away from the door and reward him "
               "for staying there."),
        ))],
    },
    {
        "type": "multi-session",
        "abstention": True,
        "question": "How much did I spend in total on my kayak and my wetsuit?",
        "answer": "The information provided is not enough. You mentioned the kayak cost $420 "
                  "but not buying a wetsuit.",
        "evidence": [
            Evidence(0, (
                _u("I bought a sit-on-top kayak for $420 this weekend! What safety gear do I "
                   "need for calm lakes?", True),
                _a("At minimum: a properly fitted buoyancy aid worn at all times, a whistle, a "
                   "spare paddle leash, a dry bag with a phone in a waterproof pouch, and "
                   "clothes for a swim. Check the forecast and tell someone your plan."),
            )),
            Evidence(11, (
                _u("I took the kayak out on Lake Windermere today. My shoulders are sore, any "
                   "stretches?"),
                _a("Try cross-body shoulder stretches, doorway chest stretches and slow arm "
                   "circles. Next time, rotate from your torso rather than pulling with your "
                   "arms to spare your shoulders."),
            )),
        ],
    },
]


def build_longmemeval(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The S-style file (evidence plus filler sessions, chronological) and the oracle file
    (evidence sessions only, in no particular order, as in the real oracle file)."""
    s_file: list[dict[str, Any]] = []
    oracle: list[dict[str, Any]] = []
    for spec in _LONGMEMEVAL_QUESTIONS:
        qid = _hex(rng) + ("_abs" if spec.get("abstention") else "")
        start = datetime(2023, rng.randint(1, 5), rng.randint(1, 28), rng.randint(8, 21),
                         rng.randrange(60))
        sessions: list[tuple[datetime, str, list[dict[str, Any]], bool]] = []
        for k, evidence in enumerate(spec["evidence"], start=1):
            moment = start + timedelta(days=evidence.day, minutes=rng.randrange(-90, 90))
            turns = []
            for role, text, has_answer in evidence.turns:
                turn: dict[str, Any] = {"role": role, "content": text}
                if has_answer:
                    turn["has_answer"] = True
                turns.append(turn)
            sessions.append((moment, f"answer_{qid[:8]}_{k}", turns, True))
        span = max(e.day for e in spec["evidence"]) + 10
        n_fillers = max(1, rng.randint(4, 6) - len(spec["evidence"]))
        for name, turns in rng.sample(_FILLERS, n_fillers):
            moment = start + timedelta(days=rng.randint(-12, span), hours=rng.randint(0, 9),
                                       minutes=rng.randrange(60))
            sessions.append((moment, name, [{"role": r, "content": c} for r, c in turns], False))
        sessions.sort(key=lambda s: s[0])
        question_date = sessions[-1][0] + timedelta(days=rng.randint(1, 9), hours=2)
        answer_ids = [sid for _, sid, _, is_answer in sessions if is_answer]
        s_file.append({
            "question_id": qid,
            "question_type": spec["type"],
            "question": spec["question"],
            "answer": spec["answer"],
            "question_date": longmemeval_datetime(question_date),
            "haystack_session_ids": [sid for _, sid, _, _ in sessions],
            "haystack_dates": [longmemeval_datetime(m) for m, _, _, _ in sessions],
            "haystack_sessions": [turns for _, _, turns, _ in sessions],
            "answer_session_ids": answer_ids,
        })
        evidence_only = [s for s in sessions if s[3]]
        rng.shuffle(evidence_only)
        oracle.append({**s_file[-1],
                       "haystack_session_ids": [sid for _, sid, _, _ in evidence_only],
                       "haystack_dates": [longmemeval_datetime(m) for m, _, _, _ in evidence_only],
                       "haystack_sessions": [turns for _, _, turns, _ in evidence_only]})
    return s_file, oracle


# --- PersonaMem v2 -------------------------------------------------------------------------------

PERSONAMEM_COLUMNS = [
    "persona_id",
    "chat_history_32k_link",
    "chat_history_128k_link",
    "user_query",
    "correct_answer",
    "incorrect_answers",
    "topic_query",
    "preference",
    "topic_preference",
    "conversation_scenario",
    "pref_type",
    "related_conversation_snippet",
    "who",
    "updated",
    "prev_pref",
    "sensitive_info",
    "total_tokens_in_chat_history_32k",
    "total_tokens_in_chat_history_128k",
    "distance_from_related_snippet_to_query_32k",
    "distance_from_related_snippet_to_query_128k",
    "num_persona_relevant_tokens_32k",
    "num_persona_irrelevant_tokens_32k",
    "num_persona_relevant_tokens_128k",
    "num_persona_irrelevant_tokens_128k",
    "raw_persona_file",
]


@dataclass(frozen=True)
class Msg:
    """A chat-history message; ``label`` marks the messages a query's preference rests on."""

    role: str
    content: str
    label: str = ""


@dataclass
class Persona:
    persona_id: int
    profile: dict[str, Any]
    messages: list[Msg]
    queries: list[dict[str, Any]]


def _persona_tomas() -> Persona:
    m = Msg
    profile = {
        "short_persona": "A high-school chemistry teacher who turns lab safety into a game",
        "name": "Tomas Herrera", "age": 34, "gender": "Male",
        "occupation": {"job_title": "Chemistry teacher", "organization": "Eastside High School",
                       "work_location": "Austin, Texas"},
        "personality": {"traits": ["patient", "curious", "dry sense of humour"]},
    }
    messages = [
        m("user", "Can you help me make this lab safety reminder sound less boring? 'Goggles "
                  "on at all times. No food in the lab. Report spills immediately.'"),
        m("assistant", "Try: 'Goggles on, always: your eyes are not replaceable. Snacks stay "
                       "outside; the lab is not a cafeteria. Spilled something? Tell us "
                       "straight away, no judgement.'"),
        m("user", "I've been running trails every weekend for years, it's how I switch off. "
                  "Can you suggest a good 15 km route near Austin?", "running"),
        m("assistant", "The Barton Creek Greenbelt from Zilker to the 360 trailhead and back is "
                       "about 15 km, shaded, with a few rocky sections."),
        m("user", "Polish this note to parents: 'The science fair is on March 3. Students need "
                  "to bring their posters by 8am. We will have vegetarian tacos for everyone, "
                  "which is what I cook at home anyway.'", "veg"),
        m("assistant", "Dear parents, our science fair takes place on 3 March. Please make sure "
                       "your child brings their poster by 8 am. Vegetarian tacos will be served "
                       "for everyone. We look forward to seeing you there!"),
        m("user", "What's the difference between an exothermic and endothermic reaction, in "
                  "words a ninth grader would get?"),
        m("assistant", "Exothermic reactions give heat away, so the beaker feels warm, like "
                       "hand warmers. Endothermic reactions soak heat up, so it feels cold, "
                       "like an instant ice pack."),
        m("user", "I have type 1 diabetes, so I always keep juice boxes in my desk drawer during "
                  "long lab days. Any tips for organising a small emergency kit?", "diabetes"),
        m("assistant", "Use a labelled pouch with fast-acting glucose, a spare meter and strips, "
                       "a note with instructions for colleagues, and check expiry dates at the "
                       "start of each term."),
        m("user", "Stress at school has been keeping me up at night lately, I barely sleep "
                  "before 2 am.", "sleep"),
        m("assistant", "That sounds draining. A consistent wind-down routine and keeping work "
                       "out of the bedroom can help."),
        m("user", "Actually, please forget that I mentioned my sleep problems. I'd rather you "
                  "didn't bring it up.", "forget"),
        m("assistant", "Understood, I won't bring it up."),
        m("user", "Translate into Spanish: 'Please wash your hands after handling the "
                  "samples.'"),
        m("assistant", "Por favor, lávense las manos después de manipular las muestras."),
        m("user", "Bad news: I hurt my knee and my physio told me to stop running for good. "
                  "I've switched to swimming laps at the community pool and honestly I love "
                  "it.", "swimming"),
        m("assistant", "I'm sorry about the knee, but swimming is a great switch: low impact "
                       "and it works the whole body."),
        m("user", "My department wants to do a potluck. Can you write a short sign-up "
                  "message?"),
        m("assistant", "Potluck time! Add your name and dish to the sheet in the staff room by "
                       "Friday so we don't end up with six bowls of chips."),
    ]
    queries = [
        {
            "query": "I've got a free Saturday morning and want to do something active to "
                     "clear my head. Any suggestions?",
            "correct": "How about a relaxed swim at the community pool? Some easy laps would "
                       "clear your head without putting any strain on your knee.",
            "incorrect": ["A long trail run at sunrise would be perfect; you could aim for a "
                          "new 15 km personal best on the Greenbelt.",
                          "Spend the morning binge-watching a new series with snacks.",
                          "Try a high-intensity CrossFit class with box jumps and sprints."],
            "topic_query": "fitness", "topic_preference": "exercise",
            "preference": "Prefers swimming laps since a knee injury ended his running",
            "pref_type": "stereotypical_pref", "scenario": "chat",
            "updated": True, "prev_pref": "Runs trails every weekend to switch off",
            "sensitive": False, "labels": ["running", "swimming"],
        },
        {
            "query": "I'm hosting my science department for dinner next week. What should I "
                     "cook?",
            "correct": "A big pot of smoky black bean and sweet potato chili with cornbread "
                       "would feed everyone, and it's fully vegetarian like the food you cook "
                       "at home.",
            "incorrect": ["Slow-smoked Texas brisket is the crowd-pleaser; start it the night "
                          "before.",
                          "Order a few large pepperoni pizzas and keep it simple.",
                          "Grilled salmon with lemon-dill sauce and roasted asparagus would "
                          "feel elegant."],
            "topic_query": "cooking", "topic_preference": "diet",
            "preference": "Eats and cooks vegetarian food",
            "pref_type": "anti_stereotypical_pref", "scenario": "email_polish",
            "updated": False, "prev_pref": "", "sensitive": False, "labels": ["veg"],
        },
        {
            "query": "Can you suggest an evening routine that helps me get my lesson planning "
                     "done?",
            "correct": "Block out 7 to 8:30 pm for planning at your desk, batch similar "
                       "lessons together, and finish with a short walk so the evening feels "
                       "done.",
            "incorrect": ["Since stress has been keeping you awake until 2 am, finish planning "
                          "by 7 pm and try melatonin before bed.",
                          "Plan lessons after midnight when the house is quiet; you'll be "
                          "more productive.",
                          "Skip planning during the week and do it all in one long Sunday "
                          "session."],
            "topic_query": "productivity", "topic_preference": "health",
            "preference": "Asked the assistant to forget his sleep problems",
            "pref_type": "ask_to_forget", "scenario": "chat",
            "updated": False, "prev_pref": "", "sensitive": False, "labels": ["sleep", "forget"],
        },
        {
            "query": "Could you draft a two-sentence bio of me for the school newsletter?",
            "correct": "Tomas Herrera teaches chemistry at Eastside High School in Austin, where "
                       "students know him for colourful lab demonstrations. Outside the "
                       "classroom he swims laps and tries out new vegetarian recipes.",
            "incorrect": ["Tomas Herrera teaches chemistry at Eastside High and manages his "
                          "type 1 diabetes with great discipline during long lab days.",
                          "Tomas Herrera is a marathon runner and barbecue enthusiast who "
                          "teaches chemistry in Austin.",
                          "Tomas Herrera teaches biology in Houston and coaches the football "
                          "team."],
            "topic_query": "writing", "topic_preference": "health",
            "preference": "Keeps his type 1 diabetes private",
            "pref_type": "sensitive_info", "scenario": "writing_help",
            "updated": False, "prev_pref": "", "sensitive": True, "labels": ["diabetes"],
        },
    ]
    return Persona(0, profile, messages, queries)


def _persona_mei() -> Persona:
    m = Msg
    profile = {
        "short_persona": "A UX designer who sketches interfaces on the bus to the climbing gym",
        "name": "Mei Lin Chen", "age": 27, "gender": "Female",
        "occupation": {"job_title": "UX designer", "organization": "a fintech startup",
                       "work_location": "Vancouver, Canada"},
        "personality": {"traits": ["direct", "playful", "detail-oriented"]},
    }
    messages = [
        m("user", "I drink two flat whites a day, they're basically my fuel. Is that too much "
                  "caffeine?", "coffee"),
        m("assistant", "Two flat whites is roughly 250 mg of caffeine, within the 400 mg most "
                       "guidelines suggest for adults."),
        m("user", "Rewrite this for my team, keep it short with bullets: 'Hi all, so I wanted "
                  "to let everyone know that the usability test is moving and also we need "
                  "volunteers and also snacks will be provided.'", "bullets"),
        m("assistant", "Hi all,\n- The usability test is moving (new date to follow).\n- We "
                       "need volunteers.\n- Snacks provided.\nThanks!"),
        m("user", "Perfect, that's exactly how I like my work emails: short and bulleted."),
        m("assistant", "Noted. I'll keep work emails short and bulleted."),
        m("user", "What's a good warm-up before a bouldering session? I go to the gym on "
                  "Commercial Drive three evenings a week.", "bouldering"),
        m("assistant", "Five minutes of easy cardio, arm circles, wrist and finger mobility, "
                       "then a few very easy problems before trying your project."),
        m("user", "Between us, I'm thinking about quitting my job next year to freelance.",
          "quit"),
        m("assistant", "That's a big decision; building a small client list before leaving can "
                       "make the jump less risky."),
        m("user", "Please forget what I said about quitting my job. I don't want that to come "
                  "up again.", "forget"),
        m("assistant", "Of course, consider it forgotten."),
        m("user", "Can you explain what a design token is, in one paragraph?"),
        m("assistant", "A design token is a named value, such as a colour, spacing or font "
                       "size, stored in one place and used by every platform, so a change in "
                       "one file updates the whole product consistently."),
        m("user", "Update: coffee has been making me jittery, so I've switched to matcha. No "
                  "more flat whites for me.", "matcha"),
        m("assistant", "Matcha is a good swap: less caffeine, released more slowly."),
        m("user", "Translate 'see you at the climbing gym' into Mandarin."),
        m("assistant", "攀岩馆见 (pānyán guǎn jiàn)."),
    ]
    queries = [
        {
            "query": "I'm meeting a friend at a cafe this afternoon. What should I order?",
            "correct": "A matcha latte would be a great pick: smooth, and without the coffee "
                       "jitters you've been avoiding.",
            "incorrect": ["Go for a double flat white with an extra shot: a strong coffee has always "
                          "been your fuel on busy afternoons.",
                          "A large iced caramel frappuccino with extra whipped cream.",
                          "A pint of craft beer; plenty of cafes have a few on tap now."],
            "topic_query": "food_and_drink", "topic_preference": "beverages",
            "preference": "Drinks matcha instead of coffee because coffee makes her jittery",
            "pref_type": "stereotypical_pref", "scenario": "chat",
            "updated": True, "prev_pref": "Drinks two flat whites a day",
            "sensitive": False, "labels": ["coffee", "matcha"],
        },
        {
            "query": "Suggest a fun activity for my birthday weekend with friends.",
            "correct": "Book a group session at a bouldering gym: everyone can try the easy "
                       "problems, and you can show off the routes you've been working on.",
            "incorrect": ["Book a karaoke night at a place with private rooms, a big shared playlist "
                          "of everyone's favourite songs, and a late dinner afterwards.",
                          "A spa day with massages and a long lunch.",
                          "A wine-tasting tour in the Okanagan valley."],
            "topic_query": "leisure", "topic_preference": "sports",
            "preference": "Goes bouldering three evenings a week",
            "pref_type": "anti_stereotypical_pref", "scenario": "chat",
            "updated": False, "prev_pref": "", "sensitive": False, "labels": ["bouldering"],
        },
        {
            "query": "Can you write a quick email to my team saying the design review moved to "
                     "Thursday at 2 pm?",
            "correct": "Subject: Design review moved to Thursday\n- New time: Thursday, 2 pm.\n"
                       "- Same room, same agenda.\n- Slides by Wednesday noon, please.\nThanks, "
                       "Mei",
            "incorrect": ["Dear team, I hope this message finds you well and that your week is "
                          "going wonderfully. I wanted to take a moment to let you all know "
                          "that, after some discussion, our design review has been moved to "
                          "Thursday afternoon at 2 pm. Warm regards, Mei",
                          "Hey team!!! Design review is now FRIDAY at 10 am, see you there!!!",
                          "Team: design review cancelled until further notice."],
            "topic_query": "work", "topic_preference": "communication",
            "preference": "Likes short, bulleted work emails",
            "pref_type": "stereotypical_pref", "scenario": "email_polish",
            "updated": False, "prev_pref": "", "sensitive": False, "labels": ["bullets"],
        },
        {
            "query": "What should I focus on in my performance review next week?",
            "correct": "Lead with the usability work you drove this year, bring two concrete "
                       "examples of impact, and ask what a path to senior designer looks like "
                       "on your team.",
            "incorrect": ["Since you're planning to quit and go freelance next year, keep it "
                          "short and don't commit to any long-term goals.",
                          "Ask for a 40% raise straight away and threaten to leave.",
                          "Don't prepare; reviews go better when they feel spontaneous."],
            "topic_query": "career", "topic_preference": "work",
            "preference": "Asked the assistant to forget her plan to quit her job",
            "pref_type": "ask_to_forget", "scenario": "chat",
            "updated": False, "prev_pref": "", "sensitive": False, "labels": ["quit", "forget"],
        },
    ]
    return Persona(1, profile, messages, queries)


def _persona_grace() -> Persona:
    m = Msg
    profile = {
        "short_persona": "A retired nurse who grows prize roses and is learning a new language",
        "name": "Grace Okoye", "age": 61, "gender": "Female",
        "occupation": {"job_title": "Retired nurse", "organization": "NHS (retired)",
                       "work_location": "Manchester, UK"},
        "personality": {"traits": ["warm", "organised", "sociable"]},
    }
    messages = [
        m("user", "I'm learning Spanish for a trip to Valencia in September. What are the "
                  "first phrases I should know?", "spanish"),
        m("assistant", "Start with greetings, 'una mesa para dos, por favor', 'la cuenta, por "
                       "favor' and '¿dónde está...?'."),
        m("user", "My climbing roses have black spot again. What can I do without strong "
                  "chemicals?", "roses"),
        m("assistant", "Pick off and bin affected leaves, water at the base in the morning, "
                       "mulch to stop spores splashing up, and improve air flow by pruning."),
        m("user", "I take warfarin for my heart, so I have to be careful with cuts in the "
                  "garden. Which gloves are best?", "warfarin"),
        m("assistant", "Long gauntlet-style leather gloves protect your forearms from thorns; "
                       "keep a small first-aid kit in the shed too."),
        m("user", "Can you rewrite this text to my friend to sound warmer: 'Call me when you "
                  "can.' I much prefer a proper phone call to texting back and forth.", "phone"),
        m("assistant", "'Would love to hear your voice, give me a ring whenever suits you!'"),
        m("user", "Change of plans! We've switched the trip from Valencia to Sicily, so I'm "
                  "learning Italian now instead of Spanish.", "italian"),
        m("assistant", "Lovely! Sicily in September is warm and quieter than August. Buon "
                       "viaggio!"),
        m("user", "What's the best way to keep cut roses fresh in a vase?"),
        m("assistant", "Cut the stems at an angle under water, strip leaves below the "
                       "waterline, change the water every two days and keep the vase out of "
                       "direct sun."),
    ]
    queries = [
        {
            "query": "I'd like to pick up a phrasebook before my trip. Which one should I get?",
            "correct": "An Italian phrasebook, ideally one with a food section, would suit "
                       "your trip to Sicily in September.",
            "incorrect": ["A Spanish phrasebook with a good section on ordering tapas would be "
                          "perfect for your trip to Valencia this autumn.",
                          "A French phrasebook; it's useful almost everywhere in Europe.",
                          "A Japanese phrasebook with a good pronunciation guide."],
            "topic_query": "travel", "topic_preference": "languages",
            "preference": "Learning Italian for a September trip to Sicily",
            "pref_type": "stereotypical_pref", "scenario": "chat",
            "updated": True, "prev_pref": "Learning Spanish for a trip to Valencia",
            "sensitive": False, "labels": ["spanish", "italian"],
        },
        {
            "query": "What should I do this weekend now that the weather's warming up?",
            "correct": "Spend a morning deadheading and feeding your roses, then visit the rose "
                       "garden at Dunham Massey for some inspiration.",
            "incorrect": ["Sign up for the 10 km charity run along the canal on Saturday morning, "
                          "then treat yourself to a long brunch by the water.",
                          "Spend the weekend at an indoor trampoline park.",
                          "Go to a heavy metal festival in Birmingham."],
            "topic_query": "leisure", "topic_preference": "gardening",
            "preference": "Grows roses and cares about keeping them healthy",
            "pref_type": "stereotypical_pref", "scenario": "chat",
            "updated": False, "prev_pref": "", "sensitive": False, "labels": ["roses"],
        },
        {
            "query": "Can you help me write a short introduction for my new walking group?",
            "correct": "Hello everyone, I'm Grace, a retired nurse from Manchester. I grow roses, "
                       "I'm learning Italian, and I'm looking forward to some lovely walks with "
                       "you all.",
            "incorrect": ["Hello everyone, I'm Grace. I take warfarin for my heart, so please "
                          "bear with me if I need to slow down.",
                          "Hi, I'm Grace, a marathon runner who loves fast-paced hikes.",
                          "Hello, I'm Grace, a retired teacher from Leeds who collects stamps."],
            "topic_query": "writing", "topic_preference": "health",
            "preference": "Keeps her heart medication private",
            "pref_type": "sensitive_info", "scenario": "writing_help",
            "updated": False, "prev_pref": "", "sensitive": True, "labels": ["warfarin"],
        },
        {
            "query": "How should I get in touch with my old colleague to catch up?",
            "correct": "Give her a ring: a proper phone call is the warmest way to catch up, and "
                       "you can plan a coffee together.",
            "incorrect": ["Send her a quick text with a few emojis and keep it light, so she can "
                          "reply whenever she has a moment to spare.",
                          "Message her on LinkedIn with a formal note.",
                          "Tag her in a post on Facebook."],
            "topic_query": "relationships", "topic_preference": "communication",
            "preference": "Prefers phone calls to texting",
            "pref_type": "anti_stereotypical_pref", "scenario": "text_polish",
            "updated": False, "prev_pref": "", "sensitive": False, "labels": ["phone"],
        },
    ]
    return Persona(2, profile, messages, queries)


def _history_file(persona: Persona, filler: Sequence[tuple[str, str]]) -> dict[str, Any]:
    system = ("You are an AI assistant helping a user with the following persona:\n\n"
              + json.dumps(persona.profile, indent=2, ensure_ascii=False)
              + "\n\nPlease respond in a way that's appropriate for this user's background, "
              "interests, and communication style.")
    chat = [{"role": "system", "content": system}]
    chat += [{"role": r, "content": c} for r, c in filler]
    chat += [{"role": msg.role, "content": msg.content} for msg in persona.messages]
    return {"metadata": {"total_messages": len(chat), "persona_id": persona.persona_id,
                         "input_filename": f"data/raw_data/raw_data_persona{persona.persona_id}"
                                           ".json"},
            "chat_history": chat}


def build_personamem(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Benchmark rows (``PERSONAMEM_COLUMNS``) and the history files they link to."""
    from memcost.tokens import count_tokens

    fillers = [turns for _, turns in _FILLERS]
    rows: list[dict[str, Any]] = []
    files: dict[str, Any] = {}
    personas = [_persona_tomas(), _persona_mei(), _persona_grace()]
    for persona in personas:
        short = [pair for turns in rng.sample(fillers, 2) for pair in turns]
        long = short + [pair for turns in rng.sample(fillers, 4) for pair in turns]
        name = f"chat_history_persona{persona.persona_id}.json"
        link_32k, link_128k = f"data/chat_history_32k/{name}", f"data/chat_history_128k/{name}"
        history_32k, history_128k = _history_file(persona, short), _history_file(persona, long)
        files[link_32k], files[link_128k] = history_32k, history_128k
        for query in persona.queries:
            rows.append(_personamem_row(persona, query, history_32k, history_128k,
                                        link_32k, link_128k, count_tokens))
    order = list(range(len(rows)))
    rng.shuffle(order)  # the real CSV is not grouped by history
    return [rows[i] for i in order], files


def _personamem_row(persona: Persona, query: dict[str, Any], history_32k: dict[str, Any],
                    history_128k: dict[str, Any], link_32k: str, link_128k: str,
                    count: Any) -> dict[str, Any]:
    labelled = {msg.label: msg for msg in persona.messages if msg.label}
    snippet = [{"role": labelled[label].role, "content": labelled[label].content}
               for label in query["labels"]]

    def measures(history: dict[str, Any]) -> tuple[int, int, int]:
        contents = [m["content"] for m in history["chat_history"]]
        total = sum(count(c) for c in contents)
        last = max(i for i, c in enumerate(contents) if c in {s["content"] for s in snippet})
        distance = sum(count(c) for c in contents[last + 1:])
        relevant = sum(count(msg.content) for msg in persona.messages if msg.label)
        return total, distance, relevant

    total_32k, distance_32k, relevant = measures(history_32k)
    total_128k, distance_128k, _ = measures(history_128k)
    return {
        "persona_id": persona.persona_id,
        "chat_history_32k_link": link_32k,
        "chat_history_128k_link": link_128k,
        "user_query": repr({"role": "user", "content": query["query"]}),
        "correct_answer": query["correct"],
        "incorrect_answers": json.dumps(query["incorrect"], ensure_ascii=False),
        "topic_query": query["topic_query"],
        "preference": query["preference"],
        "topic_preference": query["topic_preference"],
        "conversation_scenario": query["scenario"],
        "pref_type": query["pref_type"],
        "related_conversation_snippet": json.dumps(snippet, ensure_ascii=False),
        "who": "self",
        "updated": query["updated"],
        "prev_pref": query["prev_pref"],
        "sensitive_info": query["sensitive"],
        "total_tokens_in_chat_history_32k": total_32k,
        "total_tokens_in_chat_history_128k": total_128k,
        "distance_from_related_snippet_to_query_32k": distance_32k,
        "distance_from_related_snippet_to_query_128k": distance_128k,
        "num_persona_relevant_tokens_32k": relevant,
        "num_persona_irrelevant_tokens_32k": total_32k - relevant,
        "num_persona_relevant_tokens_128k": relevant,
        "num_persona_irrelevant_tokens_128k": total_128k - relevant,
        "raw_persona_file": f"data/raw_data/raw_data_persona{persona.persona_id}.json",
    }


def _csv_bytes(rows: list[dict[str, Any]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=PERSONAMEM_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


# --- Writing -------------------------------------------------------------------------------------

_README = """\
# data/sample/

Small synthetic samples of the three benchmarks, in each one's native file layout and field
names, written by `python -m memcost.samples` (seeded: running it again reproduces these files
byte for byte; a test checks it). The conversations, people and questions are invented for this
repository; none is taken from the benchmarks.

| folder | native layout | content |
|---|---|---|
| `locomo/locomo10.json` | LoCoMo (snap-research/locomo `data/locomo10.json`) | 2 conversations x 6 sessions, 33 questions in categories 1-5 |
| `longmemeval/longmemeval_s_cleaned.json` | LongMemEval S (cleaned) | 11 questions, 4-6 sessions each, all six types + 2 abstention |
| `longmemeval/longmemeval_oracle.json` | LongMemEval oracle | the same questions, evidence sessions only (unsorted) |
| `personamem_v2/benchmark/text/benchmark.csv` + `data/chat_history_{32k,128k}/` | PersonaMem v2 | 3 users, 12 queries, 4 options each |

Planted on purpose: dated facts (also relative: "last Sunday"), a preference that changes later
("yoga twice a week" then "three times a week"), facts to combine across sessions, small talk
and unrelated chats as distractors, adversarial/abstention questions whose premise is false.
"""


def render_files(seed: int = SEED) -> dict[str, bytes]:
    """Every sample file, relative path → bytes; nothing is written."""
    rng = random.Random(seed)
    files: dict[str, bytes] = {"README.md": _README.encode("utf-8")}
    files["locomo/locomo10.json"] = _json_bytes(build_locomo(rng))
    s_file, oracle = build_longmemeval(rng)
    files["longmemeval/longmemeval_s_cleaned.json"] = _json_bytes(s_file)
    files["longmemeval/longmemeval_oracle.json"] = _json_bytes(oracle)
    rows, histories = build_personamem(rng)
    files["personamem_v2/benchmark/text/benchmark.csv"] = _csv_bytes(rows)
    for link, history in sorted(histories.items()):
        files[f"personamem_v2/{link}"] = _json_bytes(history)
    return files


def write_samples(root: Path = SAMPLE_DIR, seed: int = SEED) -> list[Path]:
    """(Re)write the samples under ``root``; each file atomically."""
    written = []
    for relative, payload in render_files(seed).items():
        target = root / relative
        write_text(target, payload.decode("utf-8"))
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memcost.samples", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=SAMPLE_DIR, help="output folder")
    parser.add_argument("--seed", type=int, default=SEED, help="random seed")
    args = parser.parse_args(argv)
    for path in write_samples(args.out, args.seed):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
