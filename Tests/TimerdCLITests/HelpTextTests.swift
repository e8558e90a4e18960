import Testing
import TimerdCLI

/// Golden help texts: a change here should be a deliberate one (update docs/timerctl.md too).
@Suite("help text")
struct HelpTextTests {
    static let global = """
            Usage: timerctl [--socket PATH] [--json] VERB [ARG…]

            Control timerd, the timer daemon, over its Unix socket.

            Verbs:
              add      Add a job that runs a command on a schedule.
              exec     Add a job with a generated name, from a start and an interval; print its name.
              cancel   Cancel jobs: remove them and their timers.
              pause    Pause jobs: they do not fire until resumed.
              resume   Resume paused jobs: on their schedule, now, or after a delay.
              run      Run a job once now, outside its schedule.
              list     List the jobs with their state, next fire and last run.
              show     Show one job in detail, with its last run and output.
              reload   Re-read the config files and apply the changes.
              ping     Check that timerd answers.
              version  Print the versions of timerctl and timerd.
              help     Show help for timerctl or for one verb.

            Options:
              --socket PATH  Talk to timerd on PATH (default: see Socket below).
              --json         Print replies as JSON (exec, run, list, show, reload, version).
              -h, --help     Show help; 'timerctl help VERB' shows a verb's options.

            Socket: --socket, else $TIMERD_SOCKET, else /run/timerd/timerd.sock for root and
            $XDG_RUNTIME_DIR/timerd/timerd.sock for other users (/tmp/timerd-UID/timerd.sock without XDG_RUNTIME_DIR).

            Exit status: 0 success, 1 timerd refused the request, 2 usage error, 3 cannot reach timerd.

            """

    static let add = """
            Usage: timerctl add NAME (--every DUR [--start DUR] | --in DUR | --at TIME)
                                (--command STRING | -- PROGRAM [ARG…]) [OPTIONS]

            Add a job that runs a command on a schedule.

            Give exactly one schedule and one action. Everything after -- is the program and its
            arguments, run without a shell. Each option is also a config file key: --kill-grace 10s
            is kill_grace=10s.

            Options:
              --every DUR       Fire every DUR (e.g. 30s, 5m, 1h30m).
              --start DUR       With --every: first fire after DUR (default: one interval).
              --in DUR          Fire once, DUR from now.
              --at TIME         Fire once at an RFC 3339 time (e.g. 2026-11-29T16:00:00Z).
              --count N         With --every: stop after N runs.
              --leeway DUR      Let the timer fire up to DUR late so wake-ups coalesce.
              --command STRING  Run STRING with /bin/sh -c.
              --argv WORDS      Run a program without a shell, given as one quoted string.
              --timeout DUR     Stop a run that takes longer than DUR.
              --kill-grace DUR  Wait DUR between SIGTERM and SIGKILL (default 5s).
              --overlap POLICY  When still running at a fire: skip (default), queue, allow or replace.
              --env NAME=VALUE  Set an environment variable for the command (repeatable).
              --meta KEY=VALUE  Attach user info, passed as TIMERD_META_KEY (repeatable).
              --cwd PATH        Run in directory PATH (absolute; default /).
              --socket PATH     Talk to timerd on PATH (see 'timerctl --help').
              -h, --help        Show this help.

            """

    @Test func globalHelp() {
        #expect(HelpText.global() == Self.global)
        for arguments in [["--help"], ["-h"], ["help"]] {
            let result = runCLI(arguments)
            #expect(result.status == 0)
            #expect(result.stdout == Self.global)
            #expect(result.stderr == "")
            #expect(result.sent.isEmpty)
        }
    }

    @Test func addHelp() {
        #expect(HelpText.verb(.add) == Self.add)
        for arguments in [["add", "--help"], ["add", "-h"], ["help", "add"], ["add", "x", "--every", "1s", "--help"]] {
            let result = runCLI(arguments)
            #expect(result.status == 0)
            #expect(result.stdout == Self.add)
            #expect(result.sent.isEmpty)
        }
    }

    @Test("every verb has --help with its usage, abstract and flags", arguments: CLIVerb.allCases)
    func verbHelp(verb: CLIVerb) {
        let result = runCLI([verb.rawValue, "--help"])
        #expect(result.status == 0)
        let text = result.stdout
        if verb == .help {
            #expect(text == Self.global)
            return
        }
        #expect(text.hasPrefix("Usage: timerctl \(verb.rawValue)"))
        #expect(text.contains("\n\(verb.abstract)\n"))
        for flag in verb.flags { #expect(text.contains("  \(flag.synopsis)  "), "\(flag.synopsis)") }
        #expect(text.contains("  -h, --help"))
        #expect(text.hasSuffix("\n"))
    }

    @Test func everyVerbIsListedWithItsAbstract() {
        for verb in CLIVerb.allCases {
            #expect(Self.global.contains("  \(verb.rawValue)") && Self.global.contains(verb.abstract), "\(verb)")
            #expect(!verb.abstract.isEmpty && !verb.abstract.contains("\n"))
        }
    }

    @Test func flagDescriptionsAreOneLine() {
        for verb in CLIVerb.allCases {
            for flag in verb.flags { #expect(!flag.help.isEmpty && !flag.help.contains("\n"), "\(verb) \(flag.name)") }
        }
    }
}
