"""The PersonaMem v2 sample: three personas, twelve multiple-choice queries, 32k and 128k
histories."""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from samplegen.longmemeval import FILLERS

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


def _tomas_queries() -> list[dict[str, Any]]:
    """Tomas's queries: the question, the correct option and three incorrect ones."""
    return [
        {
            "query": "I've got a free Saturday morning and want to do something active to "
            "clear my head. Any suggestions?",
            "correct": "How about a relaxed swim at the community pool? Some easy laps would "
            "clear your head without putting any strain on your knee.",
            "incorrect": [
                "A long trail run at sunrise would be perfect; you could aim for a "
                "new 15 km personal best on the Greenbelt.",
                "Spend the morning binge-watching a new series with snacks.",
                "Try a high-intensity CrossFit class with box jumps and sprints.",
            ],
            "topic_query": "fitness",
            "topic_preference": "exercise",
            "preference": "Prefers swimming laps since a knee injury ended his running",
            "pref_type": "stereotypical_pref",
            "scenario": "chat",
            "updated": True,
            "prev_pref": "Runs trails every weekend to switch off",
            "sensitive": False,
            "labels": ["running", "swimming"],
        },
        {
            "query": "I'm hosting my science department for dinner next week. What should I cook?",
            "correct": "A big pot of smoky black bean and sweet potato chili with cornbread "
            "would feed everyone, and it's fully vegetarian like the food you cook "
            "at home.",
            "incorrect": [
                "Slow-smoked Texas brisket is the crowd-pleaser; start it the night before.",
                "Order a few large pepperoni pizzas and keep it simple.",
                "Grilled salmon with lemon-dill sauce and roasted asparagus would feel elegant.",
            ],
            "topic_query": "cooking",
            "topic_preference": "diet",
            "preference": "Eats and cooks vegetarian food",
            "pref_type": "anti_stereotypical_pref",
            "scenario": "email_polish",
            "updated": False,
            "prev_pref": "",
            "sensitive": False,
            "labels": ["veg"],
        },
        {
            "query": "Can you suggest an evening routine that helps me get my lesson planning "
            "done?",
            "correct": "Block out 7 to 8:30 pm for planning at your desk, batch similar "
            "lessons together, and finish with a short walk so the evening feels "
            "done.",
            "incorrect": [
                "Since stress has been keeping you awake until 2 am, finish planning "
                "by 7 pm and try melatonin before bed.",
                "Plan lessons after midnight when the house is quiet; you'll be more productive.",
                "Skip planning during the week and do it all in one long Sunday session.",
            ],
            "topic_query": "productivity",
            "topic_preference": "health",
            "preference": "Asked the assistant to forget his sleep problems",
            "pref_type": "ask_to_forget",
            "scenario": "chat",
            "updated": False,
            "prev_pref": "",
            "sensitive": False,
            "labels": ["sleep", "forget"],
        },
        {
            "query": "Could you draft a two-sentence bio of me for the school newsletter?",
            "correct": "Tomas Herrera teaches chemistry at Eastside High School in Austin, where "
            "students know him for colourful lab demonstrations. Outside the "
            "classroom he swims laps and tries out new vegetarian recipes.",
            "incorrect": [
                "Tomas Herrera teaches chemistry at Eastside High and manages his "
                "type 1 diabetes with great discipline during long lab days.",
                "Tomas Herrera is a marathon runner and barbecue enthusiast who "
                "teaches chemistry in Austin.",
                "Tomas Herrera teaches biology in Houston and coaches the football team.",
            ],
            "topic_query": "writing",
            "topic_preference": "health",
            "preference": "Keeps his type 1 diabetes private",
            "pref_type": "sensitive_info",
            "scenario": "writing_help",
            "updated": False,
            "prev_pref": "",
            "sensitive": True,
            "labels": ["diabetes"],
        },
    ]


def _persona_tomas() -> Persona:
    m = Msg
    profile = {
        "short_persona": "A high-school chemistry teacher who turns lab safety into a game",
        "name": "Tomas Herrera",
        "age": 34,
        "gender": "Male",
        "occupation": {
            "job_title": "Chemistry teacher",
            "organization": "Eastside High School",
            "work_location": "Austin, Texas",
        },
        "personality": {"traits": ["patient", "curious", "dry sense of humour"]},
    }
    messages = [
        m(
            "user",
            "Can you help me make this lab safety reminder sound less boring? 'Goggles "
            "on at all times. No food in the lab. Report spills immediately.'",
        ),
        m(
            "assistant",
            "Try: 'Goggles on, always: your eyes are not replaceable. Snacks stay "
            "outside; the lab is not a cafeteria. Spilled something? Tell us "
            "straight away, no judgement.'",
        ),
        m(
            "user",
            "I've been running trails every weekend for years, it's how I switch off. "
            "Can you suggest a good 15 km route near Austin?",
            "running",
        ),
        m(
            "assistant",
            "The Barton Creek Greenbelt from Zilker to the 360 trailhead and back is "
            "about 15 km, shaded, with a few rocky sections.",
        ),
        m(
            "user",
            "Polish this note to parents: 'The science fair is on March 3. Students need "
            "to bring their posters by 8am. We will have vegetarian tacos for everyone, "
            "which is what I cook at home anyway.'",
            "veg",
        ),
        m(
            "assistant",
            "Dear parents, our science fair takes place on 3 March. Please make sure "
            "your child brings their poster by 8 am. Vegetarian tacos will be served "
            "for everyone. We look forward to seeing you there!",
        ),
        m(
            "user",
            "What's the difference between an exothermic and endothermic reaction, in "
            "words a ninth grader would get?",
        ),
        m(
            "assistant",
            "Exothermic reactions give heat away, so the beaker feels warm, like "
            "hand warmers. Endothermic reactions soak heat up, so it feels cold, "
            "like an instant ice pack.",
        ),
        m(
            "user",
            "I have type 1 diabetes, so I always keep juice boxes in my desk drawer during "
            "long lab days. Any tips for organising a small emergency kit?",
            "diabetes",
        ),
        m(
            "assistant",
            "Use a labelled pouch with fast-acting glucose, a spare meter and strips, "
            "a note with instructions for colleagues, and check expiry dates at the "
            "start of each term.",
        ),
        m(
            "user",
            "Stress at school has been keeping me up at night lately, I barely sleep before 2 am.",
            "sleep",
        ),
        m(
            "assistant",
            "That sounds draining. A consistent wind-down routine and keeping work "
            "out of the bedroom can help.",
        ),
        m(
            "user",
            "Actually, please forget that I mentioned my sleep problems. I'd rather you "
            "didn't bring it up.",
            "forget",
        ),
        m("assistant", "Understood, I won't bring it up."),
        m("user", "Translate into Spanish: 'Please wash your hands after handling the samples.'"),
        m("assistant", "Por favor, lávense las manos después de manipular las muestras."),
        m(
            "user",
            "Bad news: I hurt my knee and my physio told me to stop running for good. "
            "I've switched to swimming laps at the community pool and honestly I love "
            "it.",
            "swimming",
        ),
        m(
            "assistant",
            "I'm sorry about the knee, but swimming is a great switch: low impact "
            "and it works the whole body.",
        ),
        m("user", "My department wants to do a potluck. Can you write a short sign-up message?"),
        m(
            "assistant",
            "Potluck time! Add your name and dish to the sheet in the staff room by "
            "Friday so we don't end up with six bowls of chips.",
        ),
    ]
    queries = _tomas_queries()
    return Persona(0, profile, messages, queries)


def _mei_queries() -> list[dict[str, Any]]:
    """Mei's queries: the question, the correct option and three incorrect ones."""
    return [
        {
            "query": "I'm meeting a friend at a cafe this afternoon. What should I order?",
            "correct": "A matcha latte would be a great pick: smooth, and without the coffee "
            "jitters you've been avoiding.",
            "incorrect": [
                "Go for a double flat white with an extra shot: a strong coffee has always "
                "been your fuel on busy afternoons.",
                "A large iced caramel frappuccino with extra whipped cream.",
                "A pint of craft beer; plenty of cafes have a few on tap now.",
            ],
            "topic_query": "food_and_drink",
            "topic_preference": "beverages",
            "preference": "Drinks matcha instead of coffee because coffee makes her jittery",
            "pref_type": "stereotypical_pref",
            "scenario": "chat",
            "updated": True,
            "prev_pref": "Drinks two flat whites a day",
            "sensitive": False,
            "labels": ["coffee", "matcha"],
        },
        {
            "query": "Suggest a fun activity for my birthday weekend with friends.",
            "correct": "Book a group session at a bouldering gym: everyone can try the easy "
            "problems, and you can show off the routes you've been working on.",
            "incorrect": [
                "Book a karaoke night at a place with private rooms, a big shared playlist "
                "of everyone's favourite songs, and a late dinner afterwards.",
                "A spa day with massages and a long lunch.",
                "A wine-tasting tour in the Okanagan valley.",
            ],
            "topic_query": "leisure",
            "topic_preference": "sports",
            "preference": "Goes bouldering three evenings a week",
            "pref_type": "anti_stereotypical_pref",
            "scenario": "chat",
            "updated": False,
            "prev_pref": "",
            "sensitive": False,
            "labels": ["bouldering"],
        },
        {
            "query": "Can you write a quick email to my team saying the design review moved to "
            "Thursday at 2 pm?",
            "correct": "Subject: Design review moved to Thursday\n- New time: Thursday, 2 pm.\n"
            "- Same room, same agenda.\n- Slides by Wednesday noon, please.\nThanks, "
            "Mei",
            "incorrect": [
                "Dear team, I hope this message finds you well and that your week is "
                "going wonderfully. I wanted to take a moment to let you all know "
                "that, after some discussion, our design review has been moved to "
                "Thursday afternoon at 2 pm. Warm regards, Mei",
                "Hey team!!! Design review is now FRIDAY at 10 am, see you there!!!",
                "Team: design review cancelled until further notice.",
            ],
            "topic_query": "work",
            "topic_preference": "communication",
            "preference": "Likes short, bulleted work emails",
            "pref_type": "stereotypical_pref",
            "scenario": "email_polish",
            "updated": False,
            "prev_pref": "",
            "sensitive": False,
            "labels": ["bullets"],
        },
        {
            "query": "What should I focus on in my performance review next week?",
            "correct": "Lead with the usability work you drove this year, bring two concrete "
            "examples of impact, and ask what a path to senior designer looks like "
            "on your team.",
            "incorrect": [
                "Since you're planning to quit and go freelance next year, keep it "
                "short and don't commit to any long-term goals.",
                "Ask for a 40% raise straight away and threaten to leave.",
                "Don't prepare; reviews go better when they feel spontaneous.",
            ],
            "topic_query": "career",
            "topic_preference": "work",
            "preference": "Asked the assistant to forget her plan to quit her job",
            "pref_type": "ask_to_forget",
            "scenario": "chat",
            "updated": False,
            "prev_pref": "",
            "sensitive": False,
            "labels": ["quit", "forget"],
        },
    ]


def _persona_mei() -> Persona:
    m = Msg
    profile = {
        "short_persona": "A UX designer who sketches interfaces on the bus to the climbing gym",
        "name": "Mei Lin Chen",
        "age": 27,
        "gender": "Female",
        "occupation": {
            "job_title": "UX designer",
            "organization": "a fintech startup",
            "work_location": "Vancouver, Canada",
        },
        "personality": {"traits": ["direct", "playful", "detail-oriented"]},
    }
    messages = [
        m(
            "user",
            "I drink two flat whites a day, they're basically my fuel. Is that too much caffeine?",
            "coffee",
        ),
        m(
            "assistant",
            "Two flat whites is roughly 250 mg of caffeine, within the 400 mg most "
            "guidelines suggest for adults.",
        ),
        m(
            "user",
            "Rewrite this for my team, keep it short with bullets: 'Hi all, so I wanted "
            "to let everyone know that the usability test is moving and also we need "
            "volunteers and also snacks will be provided.'",
            "bullets",
        ),
        m(
            "assistant",
            "Hi all,\n- The usability test is moving (new date to follow).\n- We "
            "need volunteers.\n- Snacks provided.\nThanks!",
        ),
        m("user", "Perfect, that's exactly how I like my work emails: short and bulleted."),
        m("assistant", "Noted. I'll keep work emails short and bulleted."),
        m(
            "user",
            "What's a good warm-up before a bouldering session? I go to the gym on "
            "Commercial Drive three evenings a week.",
            "bouldering",
        ),
        m(
            "assistant",
            "Five minutes of easy cardio, arm circles, wrist and finger mobility, "
            "then a few very easy problems before trying your project.",
        ),
        m("user", "Between us, I'm thinking about quitting my job next year to freelance.", "quit"),
        m(
            "assistant",
            "That's a big decision; building a small client list before leaving can "
            "make the jump less risky.",
        ),
        m(
            "user",
            "Please forget what I said about quitting my job. I don't want that to come up again.",
            "forget",
        ),
        m("assistant", "Of course, consider it forgotten."),
        m("user", "Can you explain what a design token is, in one paragraph?"),
        m(
            "assistant",
            "A design token is a named value, such as a colour, spacing or font "
            "size, stored in one place and used by every platform, so a change in "
            "one file updates the whole product consistently.",
        ),
        m(
            "user",
            "Update: coffee has been making me jittery, so I've switched to matcha. No "
            "more flat whites for me.",
            "matcha",
        ),
        m("assistant", "Matcha is a good swap: less caffeine, released more slowly."),
        m("user", "Translate 'see you at the climbing gym' into Mandarin."),
        m("assistant", "攀岩馆见 (pānyán guǎn jiàn)."),
    ]
    queries = _mei_queries()
    return Persona(1, profile, messages, queries)


def _grace_queries() -> list[dict[str, Any]]:
    """Grace's queries: the question, the correct option and three incorrect ones."""
    return [
        {
            "query": "I'd like to pick up a phrasebook before my trip. Which one should I get?",
            "correct": "An Italian phrasebook, ideally one with a food section, would suit "
            "your trip to Sicily in September.",
            "incorrect": [
                "A Spanish phrasebook with a good section on ordering tapas would be "
                "perfect for your trip to Valencia this autumn.",
                "A French phrasebook; it's useful almost everywhere in Europe.",
                "A Japanese phrasebook with a good pronunciation guide.",
            ],
            "topic_query": "travel",
            "topic_preference": "languages",
            "preference": "Learning Italian for a September trip to Sicily",
            "pref_type": "stereotypical_pref",
            "scenario": "chat",
            "updated": True,
            "prev_pref": "Learning Spanish for a trip to Valencia",
            "sensitive": False,
            "labels": ["spanish", "italian"],
        },
        {
            "query": "What should I do this weekend now that the weather's warming up?",
            "correct": "Spend a morning deadheading and feeding your roses, then visit the rose "
            "garden at Dunham Massey for some inspiration.",
            "incorrect": [
                "Sign up for the 10 km charity run along the canal on Saturday morning, "
                "then treat yourself to a long brunch by the water.",
                "Spend the weekend at an indoor trampoline park.",
                "Go to a heavy metal festival in Birmingham.",
            ],
            "topic_query": "leisure",
            "topic_preference": "gardening",
            "preference": "Grows roses and cares about keeping them healthy",
            "pref_type": "stereotypical_pref",
            "scenario": "chat",
            "updated": False,
            "prev_pref": "",
            "sensitive": False,
            "labels": ["roses"],
        },
        {
            "query": "Can you help me write a short introduction for my new walking group?",
            "correct": "Hello everyone, I'm Grace, a retired nurse from Manchester. I grow roses, "
            "I'm learning Italian, and I'm looking forward to some lovely walks with "
            "you all.",
            "incorrect": [
                "Hello everyone, I'm Grace. I take warfarin for my heart, so please "
                "bear with me if I need to slow down.",
                "Hi, I'm Grace, a marathon runner who loves fast-paced hikes.",
                "Hello, I'm Grace, a retired teacher from Leeds who collects stamps.",
            ],
            "topic_query": "writing",
            "topic_preference": "health",
            "preference": "Keeps her heart medication private",
            "pref_type": "sensitive_info",
            "scenario": "writing_help",
            "updated": False,
            "prev_pref": "",
            "sensitive": True,
            "labels": ["warfarin"],
        },
        {
            "query": "How should I get in touch with my old colleague to catch up?",
            "correct": "Give her a ring: a proper phone call is the warmest way to catch up, and "
            "you can plan a coffee together.",
            "incorrect": [
                "Send her a quick text with a few emojis and keep it light, so she can "
                "reply whenever she has a moment to spare.",
                "Message her on LinkedIn with a formal note.",
                "Tag her in a post on Facebook.",
            ],
            "topic_query": "relationships",
            "topic_preference": "communication",
            "preference": "Prefers phone calls to texting",
            "pref_type": "anti_stereotypical_pref",
            "scenario": "text_polish",
            "updated": False,
            "prev_pref": "",
            "sensitive": False,
            "labels": ["phone"],
        },
    ]


def _persona_grace() -> Persona:
    m = Msg
    profile = {
        "short_persona": "A retired nurse who grows prize roses and is learning a new language",
        "name": "Grace Okoye",
        "age": 61,
        "gender": "Female",
        "occupation": {
            "job_title": "Retired nurse",
            "organization": "NHS (retired)",
            "work_location": "Manchester, UK",
        },
        "personality": {"traits": ["warm", "organised", "sociable"]},
    }
    messages = [
        m(
            "user",
            "I'm learning Spanish for a trip to Valencia in September. What are the "
            "first phrases I should know?",
            "spanish",
        ),
        m(
            "assistant",
            "Start with greetings, 'una mesa para dos, por favor', 'la cuenta, por "
            "favor' and '¿dónde está...?'.",
        ),
        m(
            "user",
            "My climbing roses have black spot again. What can I do without strong chemicals?",
            "roses",
        ),
        m(
            "assistant",
            "Pick off and bin affected leaves, water at the base in the morning, "
            "mulch to stop spores splashing up, and improve air flow by pruning.",
        ),
        m(
            "user",
            "I take warfarin for my heart, so I have to be careful with cuts in the "
            "garden. Which gloves are best?",
            "warfarin",
        ),
        m(
            "assistant",
            "Long gauntlet-style leather gloves protect your forearms from thorns; "
            "keep a small first-aid kit in the shed too.",
        ),
        m(
            "user",
            "Can you rewrite this text to my friend to sound warmer: 'Call me when you "
            "can.' I much prefer a proper phone call to texting back and forth.",
            "phone",
        ),
        m("assistant", "'Would love to hear your voice, give me a ring whenever suits you!'"),
        m(
            "user",
            "Change of plans! We've switched the trip from Valencia to Sicily, so I'm "
            "learning Italian now instead of Spanish.",
            "italian",
        ),
        m(
            "assistant",
            "Lovely! Sicily in September is warm and quieter than August. Buon viaggio!",
        ),
        m("user", "What's the best way to keep cut roses fresh in a vase?"),
        m(
            "assistant",
            "Cut the stems at an angle under water, strip leaves below the "
            "waterline, change the water every two days and keep the vase out of "
            "direct sun.",
        ),
    ]
    queries = _grace_queries()
    return Persona(2, profile, messages, queries)


def _history_file(persona: Persona, filler: Sequence[tuple[str, str]]) -> dict[str, Any]:
    system = (
        "You are an AI assistant helping a user with the following persona:\n\n"
        + json.dumps(persona.profile, indent=2, ensure_ascii=False)
        + "\n\nPlease respond in a way that's appropriate for this user's background, "
        "interests, and communication style."
    )
    chat = [{"role": "system", "content": system}]
    chat += [{"role": r, "content": c} for r, c in filler]
    chat += [{"role": msg.role, "content": msg.content} for msg in persona.messages]
    return {
        "metadata": {
            "total_messages": len(chat),
            "persona_id": persona.persona_id,
            "input_filename": f"data/raw_data/raw_data_persona{persona.persona_id}.json",
        },
        "chat_history": chat,
    }


def build_personamem(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Benchmark rows (``PERSONAMEM_COLUMNS``) and the history files they link to."""
    from memcost.text import count_tokens

    fillers = [turns for _, turns in FILLERS]
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
            rows.append(
                _personamem_row(
                    persona, query, history_32k, history_128k, link_32k, link_128k, count_tokens
                )
            )
    order = list(range(len(rows)))
    rng.shuffle(order)  # the real CSV is not grouped by history
    return [rows[i] for i in order], files


def _personamem_row(
    persona: Persona,
    query: dict[str, Any],
    history_32k: dict[str, Any],
    history_128k: dict[str, Any],
    link_32k: str,
    link_128k: str,
    count: Any,
) -> dict[str, Any]:
    labelled = {msg.label: msg for msg in persona.messages if msg.label}
    snippet = [
        {"role": labelled[label].role, "content": labelled[label].content}
        for label in query["labels"]
    ]

    def measures(history: dict[str, Any]) -> tuple[int, int, int]:
        contents = [m["content"] for m in history["chat_history"]]
        total = sum(count(c) for c in contents)
        last = max(i for i, c in enumerate(contents) if c in {s["content"] for s in snippet})
        distance = sum(count(c) for c in contents[last + 1 :])
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


def csv_bytes(rows: list[dict[str, Any]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=PERSONAMEM_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")
