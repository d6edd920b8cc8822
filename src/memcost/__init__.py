"""memcost: fact-based memory vs. long-context LLMs, accuracy and cost.

A reproduction of "Beyond the Context Window: A Cost-Performance Analysis of Fact-Based Memory
vs. Long-Context LLMs for Persistent Agents". The notebooks in ``notebooks/`` tell the story; this
package holds everything they do more than once.
"""

__version__ = "0.1.0"
