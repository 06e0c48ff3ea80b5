"""Which failed setup commands are this desktop's fault: one that reaches for the web
offline, or one OSWorld's own image fails too, is marked; every other is not."""

from __future__ import annotations

from vm.tasks.setup_report import (
    A_CHECK,
    FAILS_ON_OSWORLD,
    NEEDS_WEB,
    FailedCommand,
    StepsReport,
    expected_failure,
    failed_command,
)


def test_a_command_that_reaches_for_the_web_is_marked() -> None:
    assert expected_failure("t", "wget -q https://example.com/a.zip", "") == NEEDS_WEB
    assert expected_failure("t", "pip install pysrt", "ERROR: No matching distribution "
                            "found for pysrt") == NEEDS_WEB
    assert expected_failure("t", "curl -s x", "curl: (6) Could not resolve host: x") \
        == NEEDS_WEB
    # e2b5e914: code-server asks its extension gallery for ms-python.python
    assert expected_failure("t", "code --install-extension ms-python.python",
                            "Error: getaddrinfo ENOTFOUND open-vsx.org") == NEEDS_WEB
    # a URL in a setting a command writes is only text: the profile missing is not the web
    assert expected_failure("t", "cd ~/.config/google-chrome/Default && jq '. + "
                            "{\"startup_urls\":[\"http://funbrain.com/\"]}' Preferences",
                            "cd: can't cd to /home/user/.config/google-chrome/Default") == ""
    # this machine's own addresses are not the web
    assert expected_failure("t", "curl http://localhost:9222/json", "refused") == ""
    assert expected_failure("t", "curl http://127.0.0.1:9222/json", "refused") == ""


def test_a_postconfig_probe_the_evaluator_reads_is_a_check() -> None:
    # e1fc0df3: grep finding no LanguageTool extension is the answer the evaluator scores
    assert expected_failure("t", "grep -nHr languagetool ~/.config/libreoffice", "",
                            check=True) == A_CHECK
    assert failed_command("evaluator.postconfig", 0, "t", ["grep", "x", "y"], 2, "",
                          check=True).expected == A_CHECK


def test_only_the_listed_task_gets_the_osworld_mark() -> None:
    task = "a462a795-fdc7-4b23-b689-e8b6df786b78"
    mark = expected_failure(task, "echo {CLIENT_PASSWORD} | sudo -S su - charles",
                            "su: user charles does not exist")
    assert mark.startswith(FAILS_ON_OSWORLD)
    assert expected_failure("other", "echo x | sudo -S su - charles", "") == ""
    assert expected_failure(task, "ls /nothing", "No such file") == ""


def test_a_failure_keeps_the_command_as_written_and_the_end_of_stderr() -> None:
    failure = failed_command("config", 3, "t", ["ls", "/nothing"], 2,
                             "x" * 5000 + "\nls: cannot access '/nothing'\n")
    assert failure.command == "ls /nothing" and len(failure.stderr) == 600
    assert failure.describe() == ("config[3] 'ls /nothing' exited with 2: ls: cannot "
                                  "access '/nothing'")
    assert FailedCommand.from_json(failure.to_json()) == failure
    report = StepsReport(failed_commands=[failure, FailedCommand("config", 4, "wget "
                                                                 "https://x.org", 4, "",
                                                                 NEEDS_WEB)])
    assert report.unexpected_failures == [failure]
