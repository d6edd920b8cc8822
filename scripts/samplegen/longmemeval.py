"""The LongMemEval sample: every question type, abstention, and the oracle file."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from samplegen.common import hex_id, longmemeval_datetime

# Unrelated assistant chats (LongMemEval fills haystacks with ShareGPT and UltraChat sessions).
FILLERS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "sharegpt_Xk2pQ7r_0",
        [
            ("user", "How do I get a red wine stain out of a wool carpet?"),
            (
                "assistant",
                "Act quickly and blot, don't rub. Press a clean white cloth onto the stain "
                "to lift as much wine as possible. Then mix a tablespoon of washing-up "
                "liquid and a tablespoon of white vinegar into two cups of warm water, "
                "sponge it on, and keep blotting with a dry cloth. Rinse with cold water "
                "and blot dry. Avoid hot water and bleach: heat sets the stain and bleach "
                "damages wool.",
            ),
            ("user", "What if it's already dry?"),
            (
                "assistant",
                "Dampen it with warm water first to loosen it, then use the same "
                "solution. A paste of baking soda and water left for an hour can lift "
                "the last traces; vacuum it up once dry.",
            ),
        ],
    ),
    (
        "ultrachat_214876",
        [
            ("user", "Can you explain the difference between TCP and UDP in simple terms?"),
            (
                "assistant",
                "TCP is like a phone call: a connection is set up first, every piece of "
                "data is numbered, lost pieces are sent again and everything arrives in "
                "order. UDP is like posting postcards: each message is sent on its own, "
                "with no delivery guarantee and no ordering, but with much less overhead. "
                "Web pages and email use TCP; video calls and online games often use UDP "
                "because a late packet is worse than a lost one.",
            ),
        ],
    ),
    (
        "sharegpt_m4JvT1c_1",
        [
            ("user", "Write a short poem about the first frost of autumn."),
            (
                "assistant",
                "The garden wakes in silver lace,\nEach leaf a tiny frozen face;\nThe "
                "pumpkins wear a crystal shawl,\nAnd breath hangs heavy over all.\nBy noon "
                "the sun will melt the spell,\nBut for an hour the world is still.",
            ),
            ("user", "Nice! Can you make it rhyme less obviously?"),
            (
                "assistant",
                "Silver settles on the lawn overnight,\nleaves stiffen into glass,\nthe "
                "last tomatoes hold their breath.\nBy noon the sun takes it all back,\n"
                "as if the cold had only been a rumour.",
            ),
        ],
    ),
    (
        "ultrachat_98342",
        [
            (
                "user",
                "What's a simple beginner strength routine I can do at home with two dumbbells?",
            ),
            (
                "assistant",
                "Try three sessions a week, two or three sets of 8-12 reps each: goblet "
                "squats, dumbbell rows, floor presses, Romanian deadlifts, overhead "
                "presses and a plank to finish. Pick a weight where the last two reps of "
                "each set are hard but clean, and add weight or reps when all sets feel "
                "easy. Rest a day between sessions.",
            ),
        ],
    ),
    (
        "sharegpt_Qa81LzE_0",
        [
            ("user", "How long should I boil an egg for a jammy yolk?"),
            (
                "assistant",
                "Lower a fridge-cold large egg into already boiling water and cook it "
                "for six and a half minutes, then move it straight into iced water for a "
                "couple of minutes. The white will be set and the yolk thick and jammy. "
                "Six minutes gives a runnier yolk, seven and a half a fudgy one.",
            ),
        ],
    ),
    (
        "ultrachat_305511",
        [
            ("user", "Why is Canberra the capital of Australia instead of Sydney?"),
            (
                "assistant",
                "When the colonies federated in 1901, Sydney and Melbourne both wanted to "
                "be the capital. The compromise, written into the constitution, was a new "
                "city in New South Wales but at least 100 miles from Sydney. The site was "
                "chosen in 1908, Walter Burley Griffin and Marion Mahony Griffin won the "
                "design competition, and Parliament moved there in 1927; Melbourne served "
                "as the temporary seat until then.",
            ),
        ],
    ),
    (
        "sharegpt_Tp09wWn_2",
        [
            ("user", "Summarise the plot of Pride and Prejudice in three sentences."),
            (
                "assistant",
                "Elizabeth Bennet, the sharp-witted second of five daughters, takes an "
                "instant dislike to the proud and wealthy Mr Darcy. Misunderstandings, "
                "Wickham's lies and Darcy's clumsy first proposal keep them apart, until "
                "a letter and his quiet help in rescuing her sister Lydia reveal his true "
                "character. Both overcome their pride and prejudice, and they marry.",
            ),
        ],
    ),
    (
        "ultrachat_177204",
        [
            (
                "user",
                "Help me write a polite email asking my manager for a one-week deadline "
                "extension on a report.",
            ),
            (
                "assistant",
                "Subject: Request for a short extension on the quarterly report\n\nHi "
                "Sarah,\n\nI'm writing to ask whether the deadline for the quarterly "
                "report could move from Friday to next Friday. The data from the regional "
                "teams arrived later than planned, and I'd like the extra time to check it "
                "properly rather than rush the analysis. I can share a draft of the "
                "finished sections by Wednesday if that helps.\n\nThank you for "
                "considering it,\nAlex",
            ),
        ],
    ),
    (
        "sharegpt_bN6sYhD_0",
        [
            ("user", "How can I keep a basil plant alive on a windowsill?"),
            (
                "assistant",
                "Give it the sunniest window you have, at least six hours of light. "
                "Water when the top centimetre of soil is dry, in the morning, and never "
                "let the pot stand in water. Pinch off the top pair of leaves above a "
                "node to make it bushy, and remove flower buds as soon as they appear. "
                "Supermarket pots are several plants crammed together: splitting them "
                "into two or three pots helps a lot.",
            ),
        ],
    ),
    (
        "ultrachat_441290",
        [
            ("user", "What are some good icebreaker questions for a team meeting?"),
            (
                "assistant",
                "A few that work well with colleagues: What's a small thing that made "
                "your week better? Which skill would you learn instantly if you could? "
                "What was your first job? What's a place you'd recommend everyone visit "
                "once? What's the best piece of advice you've been given at work? Keep "
                "it to one question and a minute per person.",
            ),
        ],
    ),
    (
        "sharegpt_Hh3c8Ks_1",
        [
            ("user", "Explain compound interest with an example."),
            (
                "assistant",
                "Compound interest is interest earned on interest. Put 1,000 in an "
                "account paying 5% a year: after one year you have 1,050. In year two "
                "the 5% is paid on 1,050, giving 1,102.50, and so on. After ten years "
                "you have about 1,629, compared with 1,500 if interest were only paid "
                "on the original 1,000.",
            ),
        ],
    ),
    (
        "ultrachat_62018",
        [
            ("user", "What's the difference between baking soda and baking powder?"),
            (
                "assistant",
                "Baking soda is pure sodium bicarbonate: it needs an acid in the recipe "
                "(buttermilk, yoghurt, lemon juice, brown sugar) to produce carbon "
                "dioxide. Baking powder is baking soda with the acid already mixed in, "
                "plus a starch to keep it dry, so it works with neutral ingredients. "
                "Soda is about three to four times stronger, so they are not "
                "interchangeable one for one.",
            ),
        ],
    ),
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
        "evidence": [
            Evidence(
                0,
                (
                    _u(
                        "I'm organising a surprise party for my sister Hannah's 30th this Saturday. I've "
                        "already ordered the cake from Rosie's Bakery on Main Street, a lemon drizzle, "
                        "her favourite. Could you help me with ideas for table decorations?",
                        True,
                    ),
                    _a(
                        "What a lovely surprise! Since the cake is lemon drizzle, you could build a "
                        "fresh yellow-and-white theme: lemon slices in glass jars of water as "
                        "centrepieces, white tablecloths with yellow napkins, and a few bunches of "
                        "daisies. Fairy lights along the table make evening photos look great, and a "
                        "small display of photos of Hannah at different ages is a nice personal touch."
                    ),
                    _u("Love the lemon jars idea. How many would I need for a table of twelve?"),
                    _a(
                        "For a long table seating twelve, three or four jars spaced evenly are enough to "
                        "tie the theme together without crowding the plates. Add a couple of tea lights "
                        "between them for warmth."
                    ),
                ),
            )
        ],
    },
    {
        "type": "single-session-assistant",
        "question": "In the Kyoto itinerary you suggested, which shrine did you tell me to visit "
        "at around 7 am on the first day?",
        "answer": "Fushimi Inari Shrine",
        "evidence": [
            Evidence(
                0,
                (
                    _u(
                        "I'm going to Kyoto for three days in October. Can you suggest an itinerary that "
                        "avoids the worst crowds?"
                    ),
                    _a(
                        "Here's a plan that dodges the peak crowds.\n\nDay 1: Start at Fushimi Inari "
                        "Shrine around 7 am, before the tour groups arrive, and walk up past the first "
                        "torii tunnels. In the afternoon, wander through Higashiyama to Kiyomizu-dera.\n"
                        "Day 2: Go to the Arashiyama bamboo grove early, then visit Tenryu-ji and take "
                        "the Sagano scenic railway.\nDay 3: Spend the morning at Kinkaku-ji, then walk "
                        "the Philosopher's Path to Nanzen-ji. For dinner, try the small restaurants "
                        "along Pontocho alley.",
                        True,
                    ),
                    _u("Perfect, thanks! Is a Japan Rail Pass worth it for this trip?"),
                    _a(
                        "Probably not for three days inside Kyoto: most sights are reached by city bus, "
                        "subway or the Keihan and Randen lines. A prepaid IC card such as ICOCA is "
                        "simpler."
                    ),
                ),
            )
        ],
    },
    {
        "type": "single-session-preference",
        "question": "Can you recommend something I could cook for dinner tonight?",
        "answer": "The user would prefer quick vegetarian recipes (about 30 minutes or less) "
        "with a spicy kick, ideally Thai-inspired dishes such as a green or red curry "
        "with tofu or vegetables. They would not prefer meat or fish dishes, bland "
        "food, or recipes that take a long time to prepare.",
        "evidence": [
            Evidence(
                0,
                (
                    _u(
                        "I've been vegetarian for about five years and I'm getting bored of my usual "
                        "pasta dishes. I love spicy food, Thai green curry is my all-time favourite, but "
                        "on weeknights I only have about 30 minutes to cook. Any ideas?",
                        True,
                    ),
                    _a(
                        "Here are some quick, spicy vegetarian options: a 20-minute Thai red curry with "
                        "chickpeas and spinach, crispy chilli tofu with broccoli, or spicy peanut noodles "
                        "with edamame. Keep a jar of good curry paste and a tin of coconut milk in the "
                        "cupboard and most of these come together in under half an hour."
                    ),
                    _u("The chilli tofu sounds great. Can I use tofu from the freezer?"),
                    _a(
                        "Yes, frozen and thawed tofu gets chewier and soaks up sauce better. Press out "
                        "the water before cooking."
                    ),
                ),
            )
        ],
    },
    {
        "type": "temporal-reasoning",
        "question": "How many days passed between my first pottery class and the day I glazed "
        "my first bowl?",
        "answer": "17 days. 18 days (including the last day) is also acceptable.",
        "evidence": [
            Evidence(
                0,
                (
                    _u(
                        "I just got home from my very first pottery class today! We learned to "
                        "centre clay on the wheel. Any tips for keeping my hands steady?",
                        True,
                    ),
                    _a(
                        "Congratulations on your first class! Brace your elbows against your thighs "
                        "or the splash pan, keep your hands wet but not dripping, and let the wheel "
                        "do the work at a steady medium speed. Centring is the hardest skill at "
                        "first; it gets easier within a few sessions."
                    ),
                ),
            ),
            Evidence(
                17,
                (
                    _u(
                        "Exciting news: today I glazed the first bowl I made in my pottery class! "
                        "Which glaze colours look good on a speckled stoneware body?",
                        True,
                    ),
                    _a(
                        "Speckled stoneware looks lovely under semi-transparent glazes that let the "
                        "iron specks show through: a celadon green, a honey amber or a satin white. "
                        "Opaque glazes hide the speckle, so use them only if you want a solid "
                        "colour."
                    ),
                ),
            ),
        ],
    },
    {
        "type": "knowledge-update",
        "question": "How many times a week do I go to yoga these days?",
        "answer": "Three times a week",
        "evidence": [
            Evidence(
                0,
                (
                    _u(
                        "I go to yoga twice a week at a studio near my office, usually on Tuesdays "
                        "and Thursdays. Can you suggest some stretches for tight hamstrings that I "
                        "can do at home on the other days?",
                        True,
                    ),
                    _a(
                        "Good ones for tight hamstrings: a supine hamstring stretch with a strap, "
                        "a standing forward fold with bent knees, pyramid pose with blocks, and "
                        "legs up the wall for a few minutes to finish. Hold each for 30-60 seconds "
                        "and breathe slowly; never bounce."
                    ),
                ),
            ),
            Evidence(
                45,
                (
                    _u(
                        "Quick update on my routine: I've increased my yoga to three times a week "
                        "now that I have Friday mornings free. Can you help me plan a balanced week "
                        "with some light cardio too?",
                        True,
                    ),
                    _a(
                        "Here's a balanced week: yoga on Tuesday, Thursday and Friday morning; brisk "
                        "30-minute walks or easy cycling on Monday and Wednesday; a longer walk or "
                        "swim on Saturday; and Sunday as a full rest day."
                    ),
                ),
            ),
        ],
    },
    {
        "type": "multi-session",
        "question": "How much did I spend in total on the camping gear I told you about?",
        "answer": "$335",
        "evidence": [
            Evidence(
                0,
                (
                    _u(
                        "I just bought a new two-person tent for $180 for my camping trip to the "
                        "Lake District next month. How do I seal the seams?",
                        True,
                    ),
                    _a(
                        "Set the tent up in dry weather, turn the fly inside out and run a "
                        "seam sealer suited to the fabric (silicone for silnylon, polyurethane for "
                        "PU-coated polyester) along every stitched seam. Let it cure for a day "
                        "before packing."
                    ),
                ),
            ),
            Evidence(
                9,
                (
                    _u(
                        "I picked up a down sleeping bag yesterday for $95. How should I store it "
                        "so the down doesn't get crushed?",
                        True,
                    ),
                    _a(
                        "Store it loose in the large cotton or mesh storage sack it came with, or "
                        "hang it in a wardrobe. Only use the small compression sack on the trip "
                        "itself; long-term compression damages the loft."
                    ),
                ),
            ),
            Evidence(
                20,
                (
                    _u(
                        "Last purchase for the trip: a small camping stove for $60. Is it safe to "
                        "use it in the tent porch if it rains?",
                        True,
                    ),
                    _a(
                        "It's risky: stoves produce carbon monoxide and can set the fabric alight. "
                        "If you must, keep the porch fully open, the stove on a stable base well "
                        "away from the fabric, and never cook inside the sleeping area."
                    ),
                ),
            ),
        ],
    },
    {
        "type": "temporal-reasoning",
        "question": "Which did I start first, the book club or my cello lessons?",
        "answer": "The book club",
        "evidence": [
            Evidence(
                0,
                (
                    _u(
                        "I joined a neighbourhood book club last week; our first pick is The "
                        "Remains of the Day. Any discussion questions I could bring?",
                        True,
                    ),
                    _a(
                        "A few: How reliable is Stevens as a narrator? What does he mean by "
                        "dignity, and does his idea change? Which moments show what he will not "
                        "admit about Miss Kenton? Is loyalty to Lord Darlington a virtue here?"
                    ),
                ),
            ),
            Evidence(
                26,
                (
                    _u(
                        "I started cello lessons today! My teacher says my bow hold is too tense. "
                        "How can I relax it?",
                        True,
                    ),
                    _a(
                        "Think of holding the bow as if it were a small bird: curved fingers, a bent "
                        "thumb opposite the middle finger, and the weight of the arm sinking into "
                        "the string instead of squeezing. Practise open strings slowly in front of a "
                        "mirror."
                    ),
                ),
            ),
        ],
    },
    {
        "type": "knowledge-update",
        "question": "Where does my brother Daniel work now?",
        "answer": "At a renewable energy startup in Bristol",
        "evidence": [
            Evidence(
                0,
                (
                    _u(
                        "My brother Daniel works as a financial analyst at a bank in Leeds and he's "
                        "thinking about a career change. What questions should he ask himself "
                        "before switching?",
                        True,
                    ),
                    _a(
                        "Some useful ones: What exactly do I want to leave behind, and what do I "
                        "want more of? Which of my skills transfer? Can I try the new field on a "
                        "small scale first? How long could I manage on a lower salary while I "
                        "retrain?"
                    ),
                ),
            ),
            Evidence(
                38,
                (
                    _u(
                        "Update: Daniel actually made the jump. He just started a new job at a "
                        "renewable energy startup in Bristol! What's a thoughtful congratulations "
                        "gift under 40 pounds?",
                        True,
                    ),
                    _a(
                        "A good notebook and pen for his first weeks, a guidebook to Bristol's "
                        "best cafes, a plant for his new desk, or a nice travel mug for the "
                        "commute."
                    ),
                ),
            ),
        ],
    },
    {
        "type": "multi-session",
        "question": "How many books have I told you I finished reading?",
        "answer": 3,
        "evidence": [
            Evidence(
                0,
                (
                    _u(
                        "I just finished reading Piranesi and loved the atmosphere. Can you "
                        "recommend something similar?",
                        True,
                    ),
                    _a(
                        "If you liked the dreamlike, labyrinthine mood, try Jonathan Strange & Mr "
                        "Norrell by the same author, The Night Circus, or Borges' Labyrinths."
                    ),
                ),
            ),
            Evidence(
                14,
                (
                    _u(
                        "Finished Tomorrow, and Tomorrow, and Tomorrow on the train today. What a "
                        "ride. What should I read next that's about friendship?",
                        True,
                    ),
                    _a(
                        "Try A Little Life if you want something intense, The Secret History for "
                        "friendship gone dark, or My Brilliant Friend for a lifelong friendship."
                    ),
                ),
            ),
            Evidence(
                33,
                (
                    _u(
                        "I've just finished The Overstory. It made me want to plant a tree. Which "
                        "trees grow well in a small garden?",
                        True,
                    ),
                    _a(
                        "Small gardens suit rowan, crab apple, Amelanchier (juneberry), field maple "
                        "kept pruned, or a Japanese maple in a sheltered spot."
                    ),
                ),
            ),
        ],
    },
    {
        "type": "single-session-user",
        "abstention": True,
        "question": "What is the name of my cat?",
        "answer": "The information provided is not enough. You mentioned your dog Biscuit, a "
        "corgi, but never a cat.",
        "evidence": [
            Evidence(
                0,
                (
                    _u(
                        "My dog Biscuit, a corgi, has started barking at the postman every morning. How "
                        "can I train him to stay calm?",
                        True,
                    ),
                    _a(
                        "Start by desensitising him: play recordings of footsteps and the letterbox at "
                        "a low volume while he gets treats, then slowly raise the volume over days. "
                        "When the postman comes, call him to a mat away from the door and reward him "
                        "for staying there."
                    ),
                ),
            )
        ],
    },
    {
        "type": "multi-session",
        "abstention": True,
        "question": "How much did I spend in total on my kayak and my wetsuit?",
        "answer": "The information provided is not enough. You mentioned the kayak cost $420 "
        "but not buying a wetsuit.",
        "evidence": [
            Evidence(
                0,
                (
                    _u(
                        "I bought a sit-on-top kayak for $420 this weekend! What safety gear do I "
                        "need for calm lakes?",
                        True,
                    ),
                    _a(
                        "At minimum: a properly fitted buoyancy aid worn at all times, a whistle, a "
                        "spare paddle leash, a dry bag with a phone in a waterproof pouch, and "
                        "clothes for a swim. Check the forecast and tell someone your plan."
                    ),
                ),
            ),
            Evidence(
                11,
                (
                    _u(
                        "I took the kayak out on Lake Windermere today. My shoulders are sore, any "
                        "stretches?"
                    ),
                    _a(
                        "Try cross-body shoulder stretches, doorway chest stretches and slow arm "
                        "circles. Next time, rotate from your torso rather than pulling with your "
                        "arms to spare your shoulders."
                    ),
                ),
            ),
        ],
    },
]


def build_longmemeval(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The S-style file (evidence plus filler sessions, chronological) and the oracle file
    (evidence sessions only, in no particular order, as in the real oracle file)."""
    s_file: list[dict[str, Any]] = []
    oracle: list[dict[str, Any]] = []
    for spec in _LONGMEMEVAL_QUESTIONS:
        qid = hex_id(rng) + ("_abs" if spec.get("abstention") else "")
        start = datetime(
            2023, rng.randint(1, 5), rng.randint(1, 28), rng.randint(8, 21), rng.randrange(60)
        )
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
        for name, turns in rng.sample(FILLERS, n_fillers):
            moment = start + timedelta(
                days=rng.randint(-12, span), hours=rng.randint(0, 9), minutes=rng.randrange(60)
            )
            sessions.append((moment, name, [{"role": r, "content": c} for r, c in turns], False))
        sessions.sort(key=lambda s: s[0])
        question_date = sessions[-1][0] + timedelta(days=rng.randint(1, 9), hours=2)
        answer_ids = [sid for _, sid, _, is_answer in sessions if is_answer]
        s_file.append(
            {
                "question_id": qid,
                "question_type": spec["type"],
                "question": spec["question"],
                "answer": spec["answer"],
                "question_date": longmemeval_datetime(question_date),
                "haystack_session_ids": [sid for _, sid, _, _ in sessions],
                "haystack_dates": [longmemeval_datetime(m) for m, _, _, _ in sessions],
                "haystack_sessions": [turns for _, _, turns, _ in sessions],
                "answer_session_ids": answer_ids,
            }
        )
        evidence_only = [s for s in sessions if s[3]]
        rng.shuffle(evidence_only)
        oracle.append(
            {
                **s_file[-1],
                "haystack_session_ids": [sid for _, sid, _, _ in evidence_only],
                "haystack_dates": [longmemeval_datetime(m) for m, _, _, _ in evidence_only],
                "haystack_sessions": [turns for _, _, turns, _ in evidence_only],
            }
        )
    return s_file, oracle


def build_longmemeval_scaled(rng: random.Random, users: int, tokens: int) -> list[dict[str, Any]]:
    """An S-style file at a chosen scale, for benchmarks: ``users`` questions (the sample's
    questions in turn), each with its evidence sessions and enough filler sessions to reach
    about ``tokens`` tokens of history. The filler sessions have LongMemEval-S's shape, about
    a dozen turns of about 170 tokens each (some 50 sessions per 100,000-token history), each
    turn several of the sample's filler turns of one role joined; a numbered line opens every
    session, so that nothing downstream can serve one user's work from another's."""
    from memcost.text import count_tokens

    turns = {
        role: [c for _, chat in FILLERS for r, c in chat if r == role]
        for role in ("user", "assistant")
    }
    base, _oracle = build_longmemeval(random.Random(rng.random()))
    out = []
    for i in range(users):
        record = dict(base[i % len(base)])
        record["question_id"] = f"{record['question_id']}_{i:04d}"
        sessions = list(
            zip(
                record["haystack_session_ids"],
                record["haystack_dates"],
                record["haystack_sessions"],
                strict=True,
            )
        )
        have = sum(count_tokens(t["content"]) for _, _, chat in sessions for t in chat)
        k = 0
        while have < tokens:
            chat = []
            for n in range(SCALED_TURNS):
                role = "user" if n % 2 == 0 else "assistant"
                text = " ".join(rng.choice(turns[role]) for _ in range(SCALED_JOIN))
                chat.append({"role": role, "content": text})
            chat[0]["content"] = f"(chat {i}.{k}) " + chat[0]["content"]
            have += sum(count_tokens(t["content"]) for t in chat)
            date = sessions[rng.randrange(len(sessions))][1]
            sessions.append((f"filler_{i}_{k}", date, chat))
            k += 1
        sessions.sort(key=lambda s: s[1])
        record["haystack_session_ids"] = [sid for sid, _, _ in sessions]
        record["haystack_dates"] = [d for _, d, _ in sessions]
        record["haystack_sessions"] = [chat for _, _, chat in sessions]
        out.append(record)
    return out


SCALED_TURNS = 12  # turns per generated filler session
SCALED_JOIN = 4  # sample filler turns joined into one generated turn (~170 tokens)
