"""The prompts of the field's memory systems, as named, versioned constants
(:mod:`memcost.prompts`)."""

from memcost.prompts import Prompt, register

# Mem0^g (Mem0's paper): an entity extractor and a relationship generator per segment; the
# generator also says which stored relation a new one supersedes (marked invalid, not deleted).

MEMORY_GRAPH_ENTITIES = register(
    Prompt(
        name="memory_graph_entities",
        version="v1",
        system=(
            "You build the knowledge graph of a personal assistant's memory. List the entities "
            'the messages below mention: the people (by name, or "the user" when no name is '
            "given), places, organisations, pets, activities, objects, events and dates. Give "
            "each a short type (person, place, organisation, pet, activity, object, event, "
            "date, other).\n"
            "Reply with a JSON object and nothing else: "
            '{{"entities": [{{"name": "<entity>", "type": "<type>"}}]}}'
        ),
        user="{session_line}Messages:\n{messages}",
    )
)
MEMORY_GRAPH_RELATIONS = register(
    Prompt(
        name="memory_graph_relations",
        version="v1",
        system=(
            "You build the knowledge graph of a personal assistant's memory. From the messages "
            "below, write the relations between the listed entities as triples (source, "
            "relation, destination): the relation a short verb phrase in lower case "
            '("lives in", "practises yoga", "works at"), source and destination among the '
            "entities. Only what the people themselves say. When a new relation changes "
            "something a stored relation says (a new value of the same thing: a new home, a new "
            'frequency, a new job), give that stored relation\'s id as "supersedes"; the '
            "stored relation is kept, marked as no longer valid.\n"
            "Reply with a JSON object and nothing else: "
            '{{"relations": [{{"source": "<entity>", "relation": "<verb phrase>", '
            '"destination": "<entity>", "supersedes": "<stored id or null>"}}]}}'
        ),
        user=(
            "{session_line}Entities: {entities}\n\nStored relations:\n{stored}\n\n"
            "Messages:\n{messages}"
        ),
    )
)
# The mem0 library (memcost_systems.mem0_library): its custom_fact_extraction_prompt, the
# study's extraction rules (§3.1, Appendix A) in the reply format mem0 parses ({"facts": [...]}).
# mem0 appends "Input:" and the messages; the first message gives the session date.
MEM0_EXTRACT = register(
    Prompt(
        name="mem0_extract",
        version="v1",
        system=(
            "You keep the long-term memory of a personal assistant. You are shown one part of a "
            "conversation between people; the first line gives the session date. Write down the "
            "facts about the people that would help in a later conversation with them.\n"
            "Rules:\n"
            "- Each fact is one short, self-contained sentence that names the person it is "
            'about; never "I", "he", "she".\n'
            "- Keep names, numbers, frequencies, places and dates; give dates as calendar dates, "
            'resolving "yesterday" or "last week" against the session date.\n'
            "- One piece of information per fact; leave out greetings and small talk.\n"
            "- If nothing is worth remembering, return an empty list.\n"
            'Reply with a JSON object and nothing else: {"facts": ["<fact>", ...]}'
        ),
        user="",
    )
)
# Hierarchical memory: the working memory's running summary, rewritten every few turns.
MEMORY_SUMMARY = register(
    Prompt(
        name="memory_summary",
        version="v1",
        system=(
            "You keep the working memory of a personal assistant: a short running summary of "
            "what matters about the people in a long conversation (who they are, what they are "
            "doing, their plans, preferences and recent events, with dates). Rewrite the "
            "summary to take in the new messages; keep it under {max_words} words, newest "
            "information winning over older. Reply with the summary only."
        ),
        user="Summary so far:\n{summary}\n\nNew messages:\n{messages}",
    )
)


# Observational memory (Mastra): the observer and the reflector.
SERVING_OBSERVER = register(
    Prompt(
        name="serving_observer",
        version="v1",
        system=(
            "You keep observational memory for a personal assistant. Read the messages that "
            "have not been observed yet and write down what is worth remembering about the two "
            'people: one observation per line, starting with "- ", naming the person, keeping '
            "names, dates, numbers, preferences, schedules and relationships. Leave out small "
            "talk. Reply with the observation lines only."
        ),
        user="Messages not observed yet:\n{messages}",
    )
)
SERVING_REFLECTOR = register(
    Prompt(
        name="serving_reflector",
        version="v1",
        system=(
            "You condense a personal assistant's observational memory. Merge observations about "
            "the same thing, keep only the most recent value when something changed, and drop "
            "repetitions. Reply with the condensed observations, one per line, each starting "
            'with "- ".'
        ),
        user="Observations:\n{observations}",
    )
)
