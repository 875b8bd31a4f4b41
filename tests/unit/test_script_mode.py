"""A script mode picks the command and the text of a call."""

from __future__ import annotations

from rota.protocol import scripts
from rota.protocol.scripts import ScriptMode


def test_a_mode_picks_the_command_and_the_text_of_a_call() -> None:
    enqueue = scripts.script("enqueue")
    mode = ScriptMode()
    assert mode.command(enqueue, "{ns}:", ["a"]) == ("FCALL", enqueue.function, 1, "{ns}:", "a")
    mode.use_functions(False)
    assert mode.command(enqueue, "{ns}:", ["a"]) == ("EVALSHA", enqueue.sha, 1, "{ns}:", "a")
    flagged = ScriptMode(False, flagged=True)
    assert flagged.text(enqueue) == enqueue.flagged_text != enqueue.plain_text
    assert flagged.command(enqueue, "{ns}:", [])[1] == enqueue.flagged_text[1]
    assert not ScriptMode(True, flagged=True).flagged  # flags matter only to EVALSHA
    assert repr(flagged) == "ScriptMode(EVALSHA, flagged)"
