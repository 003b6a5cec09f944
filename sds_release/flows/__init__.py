"""The flows (``release``, ``deployed``, ``replay``), running a release on this machine
(``local``) and the ``sds`` command (``cli``)."""
