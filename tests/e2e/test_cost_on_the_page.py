"""Cost and the runaways beyond depth on the session page (issue 38): the run's cost among the header's
totals (calls of unknown cost said apart), a loop refusal in the warning, money in the budget panel."""
from playwright.sync_api import expect

from dag.models import Node, Session


def role(page, name):
    return page.locator(f"[data-role={name}]")


LIMITS = {"max_depth": None, "max_llm_calls": None, "max_tokens": None, "timeout_s": None, "max_cost_usd": 0.005}
SPEND = {"depth": 1, "llm_calls": 3, "tokens": 330, "elapsed_s": 0.2, "cost_usd": 0.004, "unpriced_calls": 1}


def test_the_header_shows_the_runs_cost_its_loop_and_money_against_the_cap(page, user):
    session = Session.objects.create(owner=user, function="spend", status="completed", rev=5, node_count=5,
                                     budget=LIMITS, budget_spend=SPEND)
    entry = Node.objects.create(session=session, seq=0, kind="code", name="spend", status="completed", depth=1,
                                name_depth=1, input={}, rev=1)
    for seq, usage in enumerate([{"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.002}] * 2
                                + [{"input_tokens": 100, "output_tokens": 10}], start=1):
        Node.objects.create(session=session, seq=seq, parent=entry, kind="llm", name="llm", status="completed",
                            depth=1, input={}, usage=usage, rev=seq + 1)
    Node.objects.create(session=session, seq=4, parent=entry, kind="code", name="lookup", status="refused", depth=2,
                        input={"key": "same"}, rev=5, refusal="loop", error="LoopDetected: repeated call refused")
    page.goto(f"/sessions/{session.id}/")
    expect(role(page, "session-warning")).to_have_text("· 1 loop")
    expect(role(page, "totals").locator("[data-total=cost]")).to_have_text("$0.0040 · unknown for 1 call")
    budget = role(page, "budget")
    expect(budget.locator("[data-dimension=cost_usd]")).to_have_text("cost $0.0040 / $0.0050")
    expect(budget.locator("[data-dimension=unpriced_calls]")).to_have_text("cost unknown for 1 call, not counted")


def test_a_run_without_model_calls_shows_no_cost(page, user):
    session = Session.objects.create(owner=user, function="demo", status="completed", rev=1, node_count=1)
    Node.objects.create(session=session, seq=0, kind="code", name="demo", status="completed", depth=1,
                        name_depth=1, input={}, rev=1)
    page.goto(f"/sessions/{session.id}/")
    expect(role(page, "totals").locator("[data-total=cost]")).to_have_text("–")
