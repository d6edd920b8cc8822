"""The serving study's prompts, as named, versioned constants (:mod:`memcost.prompts`)."""

from memcost.prompts import Prompt, register

# Every user template is built from parts that end in a newline, so a history's o200k count is
# the sum of its lines' counts and a replay can count its prompts incrementally.

SERVING_ANSWER = register(
    Prompt(
        name="serving_answer",
        version="v1",
        system=(
            "You are a personal assistant following a private conversation between two people. "
            "Reply to the latest message in one or two sentences. Use the context you are given "
            "when it helps; do not invent facts that are not in it."
        ),
        user="{context_title}:\n{context}Latest message from {speaker}:\n{message}\n",
    )
)
SERVING_GENERATE = register(
    Prompt(
        name="serving_generate",
        version="v1",
        system=(
            "You write realistic synthetic chat conversations for a benchmark. The two people "
            "talk privately about their lives and mention concrete personal facts: names of "
            "friends and relatives, dates, preferences, schedules and relationships, and now and "
            "then a change to something said earlier."
        ),
        user=(
            "Continue the conversation between {first} and {second} with exactly {count} "
            "messages, alternating and starting with {starter}. Each message should be about "
            "{tokens} tokens long.\n"
            "The last messages so far:\n{recent}"
            'Reply with a JSON object and nothing else: {{"messages": ["<text>", ...]}}\n'
        ),
    )
)
