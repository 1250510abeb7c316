"""Example agentic functions a fresh install shows; all of them run on the offline simulated model.

- `wiki_agent`: an inner agent loop over two small note-searching tools. The function itself is among
  the tools it offers, and the model is told not to call it (the guard's situational prompt).
- `research_agent`: delegates to `wiki_agent` through its own model loop; shows a nested call tree,
  a multiline field with a placeholder, a hidden parameter, and a delegation budget of its own.
- `runaway_agent`: drives a *naive* model that ignores the situational prompt and calls the function
  it is running inside: five nested frames; the sixth is refused by the depth ceiling (the model is
  told), the model insists, and the second refusal ends the run, six model calls in all.
- `slow_count`: counts through child calls, a delay apart, so there is time to press Stop.
- `careful_agent`: its model calls `publish_note`, a tool a person must approve; launched attended (the
  app's default) the run waits for Approve or Deny, then answers with what the tool returned or with
  the denial.
"""
from __future__ import annotations

import os
import time

from runtime import Budget, agentic_function, checkpoint, function

# --- a small built-in note set and the tools that search it -------------------------------------

NOTES = {
    "Recursion guard": "An agentic function may call itself through its model. The runtime tells the model "
                       "where it is (the situational prompt) and refuses a sixth nested frame of one name.",
    "Delegation budget": "A budget limits a whole delegation tree: depth, model calls, tokens and time. "
                         "Children inherit it and may only tighten it.",
    "Session DAG": "Every call of an agentic function is a code node; every model call inside it is an llm "
                   "node. Nodes are written when a call starts and backfilled when it ends.",
    "Stop button": "A stop is saved on the session first, then the run's pre-invocation hook raises "
                   "CancelledError at the next function entry or model call.",
    "Prompt caching": "The system prompt stays byte-identical across nested calls; situational text goes "
                      "at the start of the user turn instead.",
}


def _words(text: str) -> set[str]:
    return {word.strip(".,;:!?()'\"").lower() for word in text.split() if len(word) > 2}


@function(toolset=("notes",))
def search_notes(query: str, limit: int = 3) -> list[dict]:
    """Search the wiki notes for a query; returns the best-matching note titles with a snippet each."""
    wanted = _words(query)
    scored = sorted(((len(wanted & _words(f"{title} {text}")), title) for title, text in NOTES.items()),
                    key=lambda pair: (-pair[0], pair[1]))
    return [{"title": title, "snippet": NOTES[title][:80]} for score, title in scored[:max(limit, 0)] if score]


@function(toolset=("notes",))
def read_note(title: str) -> str:
    """Read one wiki note in full, by its exact title."""
    if title not in NOTES:
        raise KeyError(f"no note titled {title!r}; titles are: {', '.join(NOTES)}")
    return NOTES[title]


# --- the examples ------------------------------------------------------------------------------

MODES = ("brief", "detailed")


@agentic_function(input={
    "question": {"description": "What do you want to know from the wiki notes?",
                 "placeholder": "How does the recursion guard work?", "max_length": 2000},
    "mode": {"options": list(MODES), "description": "brief: the best match; detailed: a few notes."},
})
def wiki_agent(question: str, mode: str = "brief", runtime=None) -> str:
    """Answer a question from the wiki notes by searching and reading them with a model."""
    style = "Answer in one or two sentences." if mode == "brief" else "Answer thoroughly, citing note titles."
    return runtime.exec(content=[{"type": "text", "text": f"Search the wiki notes and answer: {question}"},
                                 {"type": "text", "text": style}],
                        tools=[search_notes, read_note, wiki_agent])


@agentic_function(input={
    "topic": {"description": "The subject to research.", "placeholder": "Stopping runaway agents",
              "max_length": 500},
    "notes": {"multiline": True, "description": "Anything the researcher should keep in mind.",
              "placeholder": "One thought per line, e.g.\nfocus on the depth ceiling\nskip budgets"},
    "api_token": {"hidden": True},
}, budget=Budget(max_depth=3, max_llm_calls=30, timeout_s=120))
def research_agent(topic: str, notes: str = "", api_token: str = "", runtime=None) -> dict:
    """Research a topic by delegating questions to the wiki agent, then report what was found."""
    # api_token would authenticate an external wiki. It is hidden from forms and models (so the docstring,
    # which models read, leaves it out); without it or WIKI_API_TOKEN only the built-in notes are searched.
    source = "external wiki" if (api_token or os.environ.get("WIKI_API_TOKEN")) else "built-in notes"
    task = f"Ask the wiki agent about: {topic}"
    if notes.strip():
        task += "\nKeep in mind: " + "; ".join(line.strip() for line in notes.splitlines() if line.strip())
    answer = runtime.exec(content=[{"type": "text", "text": task}], tools=[wiki_agent, research_agent])
    return {"topic": topic, "source": source, "findings": answer}


RUNAWAY_PREFIX = "Delegate this task to an agent: "


@agentic_function(input={
    "task": {"description": "Any task: the naive model hands it straight back to this function.",
             "placeholder": "Summarise the notes"},
})
def runaway_agent(task: str, runtime=None) -> str:
    """Hand a task to an agent with a naive model that ignores where it is and calls this function again.

    Shows the recursion guard's backstop: five nested frames run; the sixth is refused by the ceiling,
    and the model's second try ends the run with the RecursionError.
    """
    task = task.removeprefix(RUNAWAY_PREFIX)  # the model passes on the whole text; keep it from growing
    return runtime.exec(content=[{"type": "text", "text": RUNAWAY_PREFIX + task}],
                        tools=[runaway_agent], model="sim:naive")


MAX_COUNT = 10_000  # enough for a 10,000-node session from the form
MAX_DELAY_S = 10.0


@function
def count_step(i: int, delay_s: float) -> int:
    """Wait `delay_s` seconds, then return `i`. The wait checks for a stop every 50 ms."""
    deadline = time.monotonic() + delay_s
    while (remaining := deadline - time.monotonic()) > 0:
        time.sleep(min(0.05, remaining))
        checkpoint()  # a stop requested during the wait ends it now
    return i


@agentic_function(input={
    "n": {"description": "How many child calls to make.", "minimum": 1, "maximum": MAX_COUNT},
    "delay_s": {"description": "Seconds between counts.", "minimum": 0, "maximum": MAX_DELAY_S},
})
def slow_count(n: int = 10, delay_s: float = 0.5) -> int:
    """Count to n through n child calls, delay_s seconds apart: a run slow enough to stop."""
    if not 1 <= n <= MAX_COUNT:
        raise ValueError(f"n must be from 1 to {MAX_COUNT}, got {n}")
    if not 0 <= delay_s <= MAX_DELAY_S:
        raise ValueError(f"delay_s must be from 0 to {MAX_DELAY_S:g} seconds, got {delay_s}")
    count = 0
    for i in range(1, n + 1):
        count = count_step(i, delay_s)
    return count


# --- a tool a person must approve ------------------------------------------------------------------

PUBLISHED: list[str] = []  # the notes published in this process, newest last
CAREFUL_PREFIX = "Publish a note: "


@function(requires_approval=True)
def publish_note(text: str) -> str:
    """Publish a note for everyone to read (it cannot be taken back, so a person approves each one)."""
    PUBLISHED.append(text)
    return f"published: {text}"


@agentic_function(input={
    "task": {"description": "What the note should say.", "placeholder": "The build is green again"},
})
def careful_agent(task: str, runtime=None) -> str:
    """Publish a note about the task, with a person's approval: the model calls `publish_note` once, the
    run waits for Approve or Deny, and the answer quotes what the tool returned or the denial."""
    return runtime.exec(f"{CAREFUL_PREFIX}{task}", tools=[publish_note])
