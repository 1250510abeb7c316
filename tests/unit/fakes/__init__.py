"""Local HTTP servers speaking the OpenAI and Anthropic protocols, for driving the official SDKs offline."""
