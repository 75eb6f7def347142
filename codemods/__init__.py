"""devfix's transform passes: one module per pass, discovered automatically.

A module whose name does not start with an underscore defines exactly one subclass of
:class:`devfix.codemods._base.DevicePass`; nothing is registered by hand.
"""
