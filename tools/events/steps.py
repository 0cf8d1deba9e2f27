"""The step runner of the Python acceptance tests (tools/events/events_test.py,
tools/sealing/sealing_test.py): each check is a named step that passes, or
fails with a reason, and the run goes on to the next; the summary line and
the exit status come from the counts."""


class Failed(Exception):
    """A step's check did not hold; the message says what was seen."""


class Steps:
    """Runs steps, printing `ok    <step>[: note]` or `FAIL  <step>: reason`.

    `errors` are the exception types besides Failed that also fail a step
    (an SDK's client errors, say) rather than stop the run; `redact` is
    applied to every reason before it is printed."""

    def __init__(self, name, errors=(), redact=lambda text: text):
        self.name = name
        self.errors = tuple(errors)
        self.redact = redact
        self.passed = 0
        self.failures = []

    def __call__(self, description, action):
        try:
            note = action()
        except Failed as failure:
            self._fail(description, str(failure))
        except self.errors as error:
            self._fail(description, f"{type(error).__name__}: {error}")
        else:
            self.passed += 1
            print(f"ok    {description}" + (f": {note}" if note else ""))

    def _fail(self, description, reason):
        self.failures.append(description)
        print(f"FAIL  {description}: {self.redact(reason)}")

    def finish(self):
        """Prints the counts; the exit status: 1 if a step failed or none ran."""
        print(f"{self.name}: {self.passed} passed, {len(self.failures)} failed")
        return 1 if self.failures or self.passed == 0 else 0
