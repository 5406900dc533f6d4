"""Pure logic over a conversation.

Parse lines, merge deltas into messages, classify tool calls, fold lifecycle events, pick the final
answer, compare results. No I/O library is imported here.
"""
