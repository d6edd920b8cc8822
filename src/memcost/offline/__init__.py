"""The offline backend's classical stand-ins, in one place: what an LLM does in the study, and
what replaces it here when no key is given.

Each module holds the deterministic method that answers one stage's requests instead of a model
(sentence facts for extraction, a lexical rule for the update phase, extractive answers for the
readers, a lexical judge). They read the request's ``payload``, never the network, and every
record they produce is labelled ``offline``: their accuracies are those of word overlap, not of
a language model.
"""
