"""Functions for the steering tests: tools a person must approve, called in parallel and three levels down."""
from __future__ import annotations

from examples.functions import careful_agent
from runtime import agentic_function, function
from runtime.messages import ModelReply, ToolCall
from runtime.providers.base import Provider

MODULE = __name__
MODULES = ["examples.functions", MODULE]


@function(requires_approval=True, register_globally=False)
def send_mail(to: str) -> str:
    """Send a mail (a person approves each one)."""
    return f"sent to {to}"


class TwoMailsAtOnce(Provider):
    """Asks for two `send_mail` calls in one reply, then answers with the results it got."""

    name = "two-mails"

    def complete(self, request, check=None):
        results = [message for message in request.messages if message.get("role") == "tool"]
        if results:
            return ModelReply(text=" | ".join(str(message["content"]) for message in results))
        return ModelReply(tool_calls=[ToolCall(id="a", name="send_mail", arguments={"to": "ann"}),
                                      ToolCall(id="b", name="send_mail", arguments={"to": "bob"})])


@agentic_function(register_globally=False)
def mail_two(runtime=None) -> str:
    """Send two mails at once, each approved on its own."""
    return runtime.exec("mail ann and bob", tools=[send_mail], model=f"{MODULE}.TwoMailsAtOnce")


@agentic_function(register_globally=False)
def delegate_note(task: str) -> str:
    """Hand the note to careful_agent: its publish_note call waits three levels down."""
    return careful_agent(task)
