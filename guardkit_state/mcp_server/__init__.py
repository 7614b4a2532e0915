"""The MCP face of the loop's memory: ``guardkit-state mcp`` (``pip install 'guardkit-state[mcp]'``).

:mod:`~guardkit_state.mcp_server.answers` holds what each tool answers, without the SDK;
:mod:`~guardkit_state.mcp_server.serve` puts those answers on the official SDK's stdio server. Only the
``mcp`` command imports the SDK: the CLI's other commands never load it.
"""
