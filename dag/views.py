from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from runtime import registry


@login_required
def function_list(request):
    functions = sorted((t for t in registry.all() if t.agentic), key=lambda t: t.tool_name)
    return render(request, "functions/list.html", {"functions": functions})
