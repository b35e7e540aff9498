"""Rows of the rule table (compaction/core/rules): The person's words and the lines of program output that report an error."""

from __future__ import annotations

from .base import Rule as R

RULES: tuple[R, ...] = (
    # --- the person's words (text_heuristics) ---
    R(
        "text_heuristics:_ACK_RE",
        "a whole message that only acknowledges or says go on (ok, thanks, lgtm, continue)",
        "a reply that carries no request or rule is chatter: quoting it costs budget and says nothing",
        ("ok", "Thanks!", "lgtm", "yes, please", "go ahead", "ok, continue", "perfect!"),
        ("ok, now add the tests", "thanks, but use tabs", "no, the block should stay"),
        how="match",
    ),
    R(
        "text_heuristics:_BARE_SLASH_RE",
        "a harness command with no arguments (/mode, /clear)",
        "a bare slash command drives the client, it asks the agent for nothing",
        ("/mode", "/clear", "/compact"),
        ("/review the parser", "fix /etc/hosts", "run it"),
        how="match",
    ),
    R(
        "text_heuristics:CORRECTION_RE",
        "a message that opens by telling the agent it went wrong or how to behave",
        "a correction binds the work that follows: the resuming agent must not repeat the mistake",
        ("no, keep the old name", "actually use the v2 API", "you forgot the migration", "don't push yet"),
        ("now add the tests", "the build is green", "can you look at x.py"),
        how="match",
    ),
    R(
        "text_heuristics:_SOFT_CORRECTION_RE",
        "an opener that says 'that was wrong' without saying what to do (no, actually, wait)",
        "such an opener often reports a bug rather than setting a rule; a directive must follow for it to be one",
        ("no, that's not it", "actually it's the bg color", "wait, what?"),
        ("never push to main", "use tabs", "nothing changed"),
        how="match",
    ),
    R(
        "text_heuristics:_DIRECTIVE_RE",
        "a sentence that says what must be done (should, must, needs to; or 'no, use X')",
        "a correction is a rule only when it states what to do instead",
        ("the block should stay as is", "no, keep the old name", "it needs to handle empty input"),
        ("it's the bg color that doesn't change", "I saw a crash", "the output looks odd"),
    ),
    R(
        "text_heuristics:INSTRUCTION_RE",
        "a rule or preference word inside a message: always, never, must, don't, avoid, make sure, from now on",
        "people state standing rules with these words; 'I don't' and 'we don't' describe, they do not order",
        (
            "never push to main",
            "always run the tests first",
            "please use pnpm",
            "don't touch the migrations",
            "make sure the tests are green",
        ),
        ("I don't understand the error", "the build passed", "what does this do?"),
    ),
    R(
        "text_heuristics:IMPERATIVE_RULE_RE",
        "a rule said without a rule word: 'use X, not Y', a prohibition shouted alone ('no console logs!')",
        "'use X, not Y' and 'no X!' are how people set a rule in one breath, after a word or two of opener",
        (
            "use rgb values in the themes, no rgb indices!",
            "please use tabs, not spaces",
            "ok so use pnpm, never npm",
            "no console logs!",
        ),
        ("use the new parser?", "the user can use it now, not later?", "I really think we use tabs, not spaces"),
        how="match",
    ),
    R(
        "text_heuristics:_OBSERVATION_RE",
        "a sentence that reports what the person saw, did or believes (I think, I noticed, I clicked, it seems)",
        "its must and never describe a bug, they set no rule",
        (
            "I think the cache is stale",
            "hm, I selected the theme and got a crash",
            "I clicked save and it never returned",
            "it seems broken",
        ),
        ("use the cache", "never cache tokens", "I asked you to never push to main", "I said use tabs"),
        how="match",
    ),
    R(
        "text_heuristics:CONSTRAINT_RE",
        "a constraint word (always, never, must, prefer, avoid, required, keep)",
        "a line with one of these words may be a rule the summary keeps",
        ("you must keep the API stable", "avoid global state", "prefer pnpm"),
        ("the test passed", "read the file", "here is the plan"),
    ),
    R(
        "text_heuristics:DECISION_RE",
        "a decision word (decided, chose, instead of, rather than, going with, trade-off)",
        "people and agents name a choice with these words",
        ("we decided to use SQLite", "going with the second approach", "use a list rather than a dict"),
        ("the tests passed", "open the file", "fixed the typo"),
    ),
    R(
        "text_heuristics:_REJECTION_RE",
        "the harness's text for a tool call the person refused or that a sibling's error cancelled",
        "a refused call did not run: a past event, not an error to fix",
        (
            "The user doesn't want to proceed with this tool use. The tool use was rejected",
            "<tool_use_error>Sibling tool call errored</tool_use_error>",
        ),
        ("Error: file not found", "The user wants the tests run", "rejected by the linter"),
    ),
    R(
        "text_heuristics:_SENTENCE_SPLIT_RE",
        "a sentence boundary: a full stop, question or exclamation mark and a space, a new line, or a "
        "lower-case word's full stop straight before a capitalised word",
        "sentences are quoted and classified one by one; a sentence starts with a capital, so a full stop "
        "before one ends a sentence even when the space was lost",
        ("Done. Next", "line one\nline two", "Why? Because", "the upload form.Let's create it", "flag.We will"),
        ("version 1.2.3", "e.g.The", "models.Model.objects", "see os.Path(x)"),
    ),
    R(
        "text_heuristics:_CODE_SPAN_RE",
        "a markdown code span (`...`)",
        "a code span is one unit: never split inside it, never read its words as prose",
        ("run `mix test` now", "`a.b()`"),
        ("no code here", "a ` lone backtick"),
    ),
    R(
        "text_heuristics:PATH_RE",
        "a file path: directories and a file with an extension, or an absolute path",
        "files are named by paths; the summary keeps the ones the work touched",
        ("edit lib/app/parser.ex now", "see ./src/index.ts", "in /etc/nginx/nginx.conf"),
        ("and/or", "use it", "version 1.2"),
    ),
    # --- error lines and command outputs (text_heuristics, conversation_text) ---
    R(
        "conversation_text:ERROR_LINE_RE",
        "a line of program output that reports an error: 'error:', a named exception, a traceback, a failed tally, "
        "'No such file or directory', a non-zero exit",
        "programs say they failed in these shapes; the word 'error' inside a sentence or a file is not one",
        (
            "error: could not compile `app`",
            "NameError: name 'x' is not defined",
            "Traceback (most recent call last):",
            "** (CompileError) lib/a.ex:3: undefined function foo/0",
            "3 failed, 10 passed in 1.2s",
            "cat: x.txt: No such file or directory",
            "FAILED tests/test_a.py::test_b",
        ),
        ("handle the error case", "errors are logged", "10 passed in 1.2s", "see ErrorBoundary."),
    ),
    R(
        "conversation_text:_SUCCESS_COUNT_RE",
        "a tally of zero failures or errors",
        "'0 failures' is a success even though it names failures",
        ("12 tests, 0 failures", "0 errors"),
        ("1 failure", "10 errors", "0 warnings"),
    ),
    R(
        "conversation_text:_TAG_RE",
        "one of the summarizer's own block tags inside content",
        "content must not open or close a block of the conversation text the model reads",
        ("<summary>", "</conversation>"),
        ("<div>", "summary"),
    ),
    R(
        "text_heuristics:_BARE_EXIT_RE",
        "a line that is only 'Exit code N'",
        "a bare exit status says less than the line that explains it",
        ("Exit code 1", "exit status: 2"),
        ("error: exit code 1 from make", "Exit code 1 because of x"),
        how="match",
    ),
    R(
        "text_heuristics:_NOISE_LINE_RE",
        "lines runners print around a failure without saying what failed: npm echoing the script it runs, "
        "Node's pointer to its warnings",
        "such a line is never the error; the line after it is",
        ("> app@1.0.0 test", "> node scripts/build.js", "(Use `node --trace-warnings ...` to show where)"),
        ("Error: build failed", "> 5 is not allowed", "npm ERR! code 1"),
        how="match",
    ),
    R(
        "text_heuristics:_STOPPED_RE",
        "how a harness says it stopped a command (aborted, timed out, killed)",
        "when no error line says more, that is the call's outcome",
        ("Command timed out after 120s", "Aborted", "killed"),
        ("the timeout is 30s", "3 tests passed"),
    ),
    R(
        "text_heuristics:_COMMAND_NOISE_RE",
        "output plumbing in a command: 2>&1, 2>/dev/null, | tail -N, | head -N",
        "what was run is the command without how its output was cut",
        ("mix test 2>&1 | tail -20", "make 2>/dev/null", "npm test | head -5"),
        ("mix test", "grep -n tail file"),
    ),
    R(
        "text_heuristics:_ERROR_TAG_RE",
        "a harness's error wrapper tag (<tool_use_error>)",
        "the wrapper is markup, the error is inside it",
        ("<tool_use_error>File does not exist.</tool_use_error>", "</tool_use_error>"),
        ("<error>", "tool_use_error"),
    ),
    R(
        "text_heuristics:_ANSI_RE",
        "terminal colour codes, with their ESC byte or with it already stripped",
        "colour codes are not text: an error line is compared without them",
        ("\x1b[31merror\x1b[0m", "[22m[39mWARN"),
        ("plain text", "[1] item"),
    ),
    R(
        "text_heuristics:_OPERAND_RE",
        "a word that names what a check runs on (a path, a test id, a file), not which check",
        "`mix test a.exs` and `mix test` are the same check on different targets",
        ("test/a_test.exs", "tests/x.py::test_y", "app.js", ".."),
        ("test", "run", "check"),
    ),
    R(
        "text_heuristics:_REDIRECT_RE",
        "a shell redirection (> file, >> file, < file, 2> file)",
        "where output goes is no target of the check",
        ("pytest > out.txt", "make 2> err.log", "cmd < input"),
        ("pytest tests", "a=b"),
    ),
)
