"""The language server (pygls): the editor transport of the agent protocol, plus inline
completion and code actions. Thin handlers only; agent logic stays in `opencomposer.agent`.
"""
