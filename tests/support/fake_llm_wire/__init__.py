"""The fake LLM's parts (`../fake_llm.py` is the server and its command line):

  state      the turn queue, the request log, usage arithmetic
  handler    the HTTP handler: body decoding, SSE plumbing, routes, test control
  models     model listings and error bodies of each API
  anthropic  POST /v1/messages
  openai     POST /v1/chat/completions and /v1/responses
  gemini     POST /v1beta/models/M:generateContent and :streamGenerateContent
"""
