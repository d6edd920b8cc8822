"""The LoCoMo sample: two scripted conversations of six dated sessions, 33 questions."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from samplegen.common import day_text, locomo_datetime, next_weekday, previous_weekday


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


def _maya_jonas_first_sessions() -> list[list[Turn]]:
    """Sessions 1-3 of Maya and Jonas's conversation."""
    t = Turn
    return [
        [
            t("a", "Hey Jonas! It's been ages. How have you been?"),
            t(
                "b",
                "Maya! Good to hear from you. Busy but good. I finally adopted a dog in January.",
                "adopt",
                "Jonas adopted a dog in January 2023.",
            ),
            t("a", "No way! What kind of dog?"),
            t(
                "b",
                "A beagle called Pretzel. He's three and has more energy than I do.",
                "dog",
                "Jonas's dog Pretzel is a three-year-old beagle.",
            ),
            t("a", "Beagles are the best. Pretzel is such a good name."),
            t(
                "b",
                "He came with it, I couldn't bring myself to change it. What about you, "
                "anything new?",
            ),
            t(
                "a",
                "I've started going to yoga twice a week at a little studio near my office. "
                "It's really helping with my back.",
                "yoga1",
                "Maya goes to yoga twice a week at a studio near her office.",
            ),
            t("b", "That's great. Is it the hot yoga kind?"),
            t("a", "No, just regular vinyasa. The hot rooms make me dizzy."),
            t("b", "Fair enough. How's your sister doing?"),
            t(
                "a",
                "Lena's good! She moved to Porto last autumn for a job at a design agency.",
                "sister",
                "Maya's sister Lena lives in Porto and works at a design agency.",
            ),
            t("b", "Porto is beautiful. You should visit her."),
            t("a", "That's the plan, hopefully this spring."),
        ],
        [
            t(
                "b",
                "Quick update: I signed up for the Lisbon half marathon! It's in a few weeks.",
                "marathon_signup",
                "Jonas signed up for the Lisbon half marathon.",
            ),
            t("a", "Wow, a half marathon! Have you run one before?"),
            t("b", "Never. I'm following a training plan with four runs a week."),
            t("a", "That's serious commitment."),
            t("b", "Pretzel comes along on the short runs, he loves it."),
            t(
                "a",
                "I've been busy too. The library asked me to paint a mural for the children's "
                "section.",
                "mural",
                "Maya is painting a mural for the library's children's section.",
            ),
            t(
                "a",
                "Here's how far I've got.",
                "mural_photo",
                "Maya's library mural shows kingfishers and herons.",
                caption="a photo of a half painted mural of birds and reeds on a brick wall",
                query="mural kingfisher heron brick wall",
            ),
            t("b", "That looks amazing! Are those kingfishers?"),
            t("a", "Yes! Kingfishers and herons, the river birds from around town."),
            t("b", "When will it be finished?"),
            t("a", "Hopefully in a couple of months, if I keep painting on weekends."),
        ],
        [
            t(
                "a",
                "I just got back from Porto! I visited Lena last weekend.",
                "porto_visit",
                "Maya visited her sister Lena in Porto.",
            ),
            t("b", "How was it?"),
            t(
                "a",
                "Wonderful. We took a boat trip on the Douro and ate far too many pasteis de nata.",
            ),
            t("b", "Jealous. Did you see her new flat?"),
            t("a", "Yes, it overlooks the river. Tiny but gorgeous."),
            t(
                "b",
                "Sounds perfect. Pretzel had a rough week though, he ate a sock and we ended "
                "up at the vet.",
                "vet",
                "Pretzel swallowed a sock and had to see the vet.",
            ),
            t("a", "Oh no! Is he okay?"),
            t(
                "b",
                "He's fine now, the vet said he was lucky. It cost me 240 euros though.",
                "vet_cost",
                "Pretzel's vet visit cost Jonas 240 euros.",
            ),
            t("a", "Ouch. Poor Pretzel."),
            t("b", "How's the yoga going?"),
            t("a", "Still going, still twice a week. My back feels so much better."),
        ],
    ]


def _maya_jonas_last_sessions() -> list[list[Turn]]:
    """Sessions 4-6 of Maya and Jonas's conversation."""
    t = Turn
    return [
        [
            t(
                "b",
                "I did it! I ran the Lisbon half marathon last Sunday.",
                "marathon_done",
                "Jonas ran the Lisbon half marathon.",
            ),
            t("a", "Congratulations!! How did it go?"),
            t(
                "b",
                "Finished in 1 hour 52 minutes. My legs are still sore.",
                "marathon_time",
                "Jonas finished the Lisbon half marathon in 1 hour 52 minutes.",
            ),
            t("a", "That's an amazing time for a first one."),
            t("b", "Thanks! What's new with you?"),
            t(
                "a",
                "I upped my yoga to three times a week. I added a Saturday morning class.",
                "yoga2",
                "Maya now goes to yoga three times a week, including Saturday mornings.",
            ),
            t("b", "Look at you! Is the back pain gone?"),
            t("a", "Mostly. I also do the breathing exercises at home now."),
            t("b", "I should try yoga for recovery."),
            t("a", "You should, there's a beginners' class on Thursdays."),
        ],
        [
            t(
                "b",
                "I bought a camera! A used Fujifilm X-T2.",
                "camera",
                "Jonas bought a used Fujifilm X-T2 camera.",
            ),
            t("a", "Oh nice, what are you going to photograph?"),
            t(
                "b",
                "Landscapes mostly. I'm planning a photography trip to the Azores in August.",
                "azores_plan",
                "Jonas is planning a landscape photography trip to the Azores.",
            ),
            t("a", "The Azores! Lena went there last year and loved it."),
            t(
                "a",
                "The mural is finished, by the way. The library is unveiling it on Friday.",
                "mural_done",
                "Maya finished the library mural; it is unveiled on a Friday.",
            ),
            t("b", "That's huge! Congrats. Can I come?"),
            t("a", "Of course. Bring Pretzel if they allow dogs, haha."),
            t("b", "I'll bring the camera instead."),
        ],
        [
            t(
                "a",
                "Guess what, I adopted a cat! She's a grey tabby called Miso.",
                "cat",
                "Maya adopted a grey tabby cat named Miso.",
            ),
            t("b", "Miso! How are you two getting along?"),
            t("a", "Slowly. She's very shy and hides under the sofa most of the day."),
            t(
                "b",
                "I booked my flights to the Azores, I fly out on 12 August.",
                "azores_booked",
                "Jonas flies to the Azores on 12 August 2023.",
            ),
            t("a", "Exciting! How long are you going for?"),
            t("b", "Ten days. I'm renting a car to drive around Sao Miguel."),
            t("a", "Don't forget to send me pictures this time."),
            t("b", "I promise. How's the yoga?"),
            t("a", "Still three times a week, I'm hooked."),
        ],
    ]


def _conv_maya_jonas() -> Script:
    sessions = _maya_jonas_first_sessions() + _maya_jonas_last_sessions()
    return Script("conv-1", "Maya", "Jonas", date(2023, 3, 1), sessions)


def _priya_tom_first_sessions() -> list[list[Turn]]:
    """Sessions 1-3 of Priya and Tom's conversation."""
    t = Turn
    return [
        [
            t("b", "Priya! How are things at the hospital?"),
            t(
                "a",
                "Hectic as ever. I'm a nurse at St Mary's, and next month I'm switching to "
                "night shifts.",
                "nights",
                "Priya is a nurse at St Mary's hospital and is moving to night shifts.",
            ),
            t("b", "Nights! How do you feel about that?"),
            t("a", "Nervous, honestly. The pay is better but I love my sleep."),
            t(
                "b",
                "I have news too: I'm finally opening my own bakery. It's called Crumb & Co, "
                "on Elm Street.",
                "bakery",
                "Tom is opening a bakery called Crumb & Co on Elm Street.",
            ),
            t("a", "Tom, that's fantastic! You've talked about this for years."),
            t("b", "I know! Ava keeps asking if she can be the taste tester."),
            t("a", "How old is she now?"),
            t(
                "b",
                "Five, she turns six in a couple of months.",
                "ava_age",
                "Tom's daughter Ava is five and turns six soon.",
            ),
        ],
        [
            t(
                "b",
                "The bakery opened last Saturday!",
                "opened",
                "Crumb & Co opened on a Saturday.",
            ),
            t("a", "Congratulations! How was the first week?"),
            t(
                "b",
                "Mad. We sold out of cardamom buns by ten every morning. They're our best seller.",
                "buns",
                "Cardamom buns are the best seller at Crumb & Co.",
            ),
            t("a", "I need to try one."),
            t("b", "I'll save you some. What's new with you?"),
            t(
                "a",
                "I've started learning Spanish. We're planning a trip to Valencia in September.",
                "spanish",
                "Priya is learning Spanish for a September trip to Valencia.",
            ),
            t("b", "Nice! Duolingo?"),
            t("a", "Duolingo plus an evening class on Wednesdays."),
        ],
        [
            t(
                "a",
                "First two weeks of night shifts done. I'm a zombie.",
                "nights_started",
                "Priya has started working night shifts.",
            ),
            t("b", "Are you sleeping at all?"),
            t(
                "a",
                "Badly. I bought blackout curtains, which helps a bit.",
                "curtains",
                "Priya bought blackout curtains to sleep during the day.",
            ),
            t(
                "b",
                "Ava had her school play yesterday. She played a tree!",
                "play",
                "Ava played a tree in her school play.",
            ),
            t(
                "b",
                "Look at her.",
                "play_photo",
                "Ava wore a tree costume in the school play.",
                caption="a photo of a small girl in a green tree costume on a school stage",
                query="girl tree costume school play",
            ),
            t("a", "Oh my goodness, the most serious tree I have ever seen."),
            t("b", "She took it very seriously. Not a single leaf moved."),
        ],
    ]


def _priya_tom_last_sessions() -> list[list[Turn]]:
    """Sessions 4-6 of Priya and Tom's conversation."""
    t = Turn
    return [
        [
            t(
                "b",
                "Big step: I hired my first employee, Sam. He's a pastry chef from Lyon.",
                "hire",
                "Tom hired Sam, a pastry chef from Lyon, as his first employee.",
            ),
            t("a", "A French pastry chef! The croissants are going to be unreal."),
            t("b", "That's the plan. How's the Spanish going?"),
            t(
                "a",
                "Funny you ask. We changed the trip to Sicily, so I switched to learning Italian.",
                "italian",
                "Priya switched from Spanish to Italian because her "
                "trip changed from Valencia to Sicily.",
            ),
            t("b", "Ha! Ciao then."),
            t("a", "Ciao! Still September, just a different island of lemons."),
        ],
        [
            t(
                "b",
                "Ava's sixth birthday party is this Saturday at the bakery. You're invited!",
                "party",
                "Ava's sixth birthday party is at the bakery on a Saturday.",
            ),
            t("a", "I wouldn't miss it. What's the theme?"),
            t("b", "Unicorns, obviously. Sam is making a three-tier unicorn cake."),
            t(
                "a",
                "Lucky girl. I have news too: I got promoted to charge nurse!",
                "promotion",
                "Priya was promoted to charge nurse.",
            ),
            t("b", "Priya! That's brilliant. Does that mean fewer night shifts?"),
            t("a", "Sadly no, but I get to run the ward on nights."),
        ],
        [
            t(
                "b",
                "The local paper named Crumb & Co best new bakery in town!",
                "award",
                "Crumb & Co won best new bakery from the local paper.",
            ),
            t("a", "That's amazing, you deserve it."),
            t("b", "Sam's croissants did a lot of the work. How's the Italian?"),
            t(
                "a",
                "Good! My teacher thinks I'm ready for the A1 exam before the trip.",
                "exam",
                "Priya's Italian teacher thinks she is ready for the A1 exam.",
            ),
            t("b", "In bocca al lupo!"),
            t("a", "Crepi! See, I'm learning."),
        ],
    ]


def _conv_priya_tom() -> Script:
    sessions = _priya_tom_first_sessions() + _priya_tom_last_sessions()
    return Script("conv-2", "Priya", "Tom", date(2023, 2, 1), sessions)


# Small talk inserted at the end of some sessions: distractors that mention nothing asked about.
_SMALL_TALK = [
    [
        ("a", "Ugh, it's been raining all week here."),
        ("b", "Same here, I've forgotten what the sun looks like."),
    ],
    [
        ("b", "Have you watched anything good lately?"),
        ("a", "A documentary about octopuses. Weirdly moving!"),
    ],
    [
        ("a", "I tried the new ramen place downtown yesterday."),
        ("b", "Any good? I'm always looking for a decent ramen spot."),
    ],
    [
        ("b", "Work has been hectic, we're short two people on my team."),
        ("a", "That sounds exhausting, I hope it calms down soon."),
    ],
    [
        ("a", "My neighbour has started learning the trumpet. At seven in the morning."),
        ("b", "Oh no. That's rough."),
    ],
    [("b", "I finally fixed the squeaky door in my hallway."), ("a", "The small victories!")],
    [("a", "Anyway, I should go and make dinner. Talk soon!"), ("b", "Talk soon, take care!")],
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
            record: dict[str, Any] = {
                "speaker": names[turn.speaker],
                "dia_id": dia_id,
                "text": turn.text,
            }
            if turn.caption:
                # LoCoMo's photo turns: image URL(s), BLIP caption, the search query used
                record = {
                    "speaker": names[turn.speaker],
                    "img_url": [
                        f"https://example.org/locomo-sample/{script.sample_id}/"
                        f"{dia_id.replace(':', '_')}.jpg"
                    ],
                    "blip_caption": turn.caption,
                    "query": turn.query,
                    "dia_id": dia_id,
                    "text": turn.text,
                }
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
            + " ".join(said)
        )
        event_summary[f"events_session_{s}"] = {
            script.speaker_a: [f for f, _ in session_obs[script.speaker_a]],
            script.speaker_b: [f for f, _ in session_obs[script.speaker_b]],
            "date": f"{moment.day} {moment:%B}, {moment.year}",
        }
    days = [m.date() for m in moments]
    qa = [_locomo_qa(q, dia) for q in _locomo_questions(script.sample_id, days)]
    return {
        "qa": qa,
        "conversation": conversation,
        "event_summary": event_summary,
        "observation": observation,
        "session_summary": session_summary,
        "sample_id": script.sample_id,
    }


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
        return {
            "category": category,
            "question": question,
            key: answer,
            "evidence": list(evidence),
            **more,
        }

    if sample_id == "conv-1":
        race = previous_weekday(days[3], 6)
        unveiling = next_weekday(days[4], 4)
        return [
            q(4, "What breed is Jonas's dog?", "A beagle", "dog"),
            q(4, "Where does Maya's sister Lena live?", "Porto", "sister"),
            q(4, "What camera did Jonas buy?", "A used Fujifilm X-T2", "camera"),
            q(4, "What is the name of Maya's cat?", "Miso", "cat"),
            q(4, "How much did Pretzel's vet visit cost?", "240 euros", "vet_cost"),
            q(
                4,
                "What birds are painted on Maya's library mural?",
                "Kingfishers and herons",
                "mural_photo",
            ),
            q(4, "How many times a week does Maya go to yoga now?", 3, "yoga2"),
            q(
                2,
                "When did Maya visit her sister in Porto?",
                f"The weekend before {day_text(days[2])}",
                "porto_visit",
            ),
            q(2, "When did Jonas run the Lisbon half marathon?", day_text(race), "marathon_done"),
            q(2, "When is the library unveiling Maya's mural?", day_text(unveiling), "mural_done"),
            q(2, "When does Jonas fly to the Azores?", "12 August 2023", "azores_booked"),
            q(2, "When did Jonas adopt Pretzel?", "January 2023", "adopt"),
            q(
                1,
                "What pets do Jonas and Maya have?",
                "Jonas has a beagle named Pretzel and Maya has a grey tabby cat named Miso",
                "dog",
                "cat",
            ),
            q(
                1,
                "How did Maya's yoga routine change over the spring?",
                "She went from twice a week to three times a week, adding a Saturday class",
                "yoga1",
                "yoga2",
            ),
            q(
                1,
                "Which two Portuguese cities did Maya and Jonas travel to?",
                "Porto (Maya) and Lisbon (Jonas)",
                "porto_visit",
                "marathon_done",
            ),
            q(
                3,
                "Would Jonas enjoy a landscape photography workshop?",
                "Likely yes; he bought a camera to photograph landscapes and planned a "
                "photography trip to the Azores",
                "camera",
                "azores_plan",
            ),
            q(5, "What breed is Maya's dog?", "A beagle", "dog"),
            q(
                5,
                "How long did it take Maya to finish the Lisbon half marathon?",
                "1 hour 52 minutes",
                "marathon_time",
            ),
            q(5, "What is the name of Jonas's cat?", "Miso", "cat"),
        ]
    opened = previous_weekday(days[1], 5)
    party = next_weekday(days[4], 5)
    return [
        q(4, "What is the name of Tom's bakery?", "Crumb & Co", "bakery"),
        q(4, "What is the best-selling item at Tom's bakery?", "Cardamom buns", "buns"),
        q(4, "Who was the first employee Tom hired?", "Sam, a pastry chef from Lyon", "hire"),
        q(4, "What role did Ava play in her school play?", "A tree", "play"),
        q(
            4,
            "What did Priya buy to help her sleep during the day?",
            "Blackout curtains",
            "curtains",
        ),
        q(4, "How old did Ava turn at her birthday party?", 6, "party"),
        q(2, "When did Tom's bakery open?", day_text(opened), "opened"),
        q(2, "When was Ava's sixth birthday party?", day_text(party), "party"),
        q(
            1,
            "Which language is Priya learning now, and why did she change?",
            "Italian; her trip changed from Valencia to Sicily, so she switched from Spanish",
            "spanish",
            "italian",
        ),
        q(
            1,
            "What changes happened in Priya's nursing job this year?",
            "She moved to night shifts and was promoted to charge nurse",
            "nights",
            "promotion",
        ),
        q(
            3,
            "Would Priya appreciate an Italian phrasebook as a gift?",
            "Likely yes; she is learning Italian for a trip to Sicily",
            "italian",
        ),
        q(5, "What is the name of Priya's bakery?", "Crumb & Co", "bakery", evidence_as_text=True),
        q(5, "Which hospital does Tom work at?", "St Mary's", "nights"),
        q(5, "What role did Priya's daughter play in the school play?", "A tree", "play"),
    ]


def build_locomo(rng: random.Random) -> list[dict[str, Any]]:
    return [_build_locomo_sample(s, rng) for s in (_conv_maya_jonas(), _conv_priya_tom())]
