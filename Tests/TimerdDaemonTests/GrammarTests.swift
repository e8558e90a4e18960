import Testing
import TimerdConfig
import TimerdCore
import TimerdProtocol
@testable import TimerdDaemon

/// Each verb's grammar errors, as the daemon answers them over the protocol: the typed command's decoder
/// (`ControlCommand`, TimerdProtocol) gives them, and the daemon passes them on.
@Suite struct GrammarTests {
    let handler: ControlHandler

    init() {
        let access = AccessControl(AccessSettings())
        let registry = Registry(launcher: FakeLauncher(), log: Logger(sink: MemoryLogSink(), minimum: .debug), maxRunning: 10,
                                baseEnvironment: [], access: access, clock: testClock())
        handler = ControlHandler(registry: registry, access: access, accounts: FakeAccounts(), reload: { ReloadSummary() })
    }

    /// Every grammar error of every verb, as timerd has answered them since before the typed commands
    /// (the daemon's replies pinned on the handler that checked words verb by verb).
    static let errors: [(line: String, reply: String)] = [
        (#"PING x"#, #"ERR bad-argument PING takes no arguments, got "x""#),
        (#"PING a=1"#, #"ERR bad-argument PING takes no options, got a="#),
        (#"PING -- x"#, #"ERR bad-argument PING takes no program after --"#),
        (#"VERSION x"#, #"ERR bad-argument VERSION takes no arguments, got "x""#),
        (#"HELP x"#, #"ERR bad-argument HELP takes no arguments, got "x""#),
        (#"STATS x"#, #"ERR bad-argument STATS takes no arguments, got "x""#),
        (#"RELOAD x"#, #"ERR bad-argument RELOAD takes no arguments, got "x""#),
        (#"CLUSTER x"#, #"ERR bad-argument CLUSTER takes no arguments, got "x""#),
        (#"STATS -- "#, #"ERR bad-argument STATS takes no program after --"#),
        (#"ADD"#, #"ERR missing-argument ADD needs a job name"#),
        (#"ADD a b every=1s command=x"#, #"ERR bad-argument ADD takes one job name; unexpected "b""#),
        (#"ADD 'bad name' every=1s command=x"#, #"ERR bad-argument invalid job name "bad name": only letters, digits, '_', '.' and '-' are allowed"#),
        (#"ADD a=1"#, #"ERR missing-argument ADD needs a job name"#),
        (#"EXEC x"#, #"ERR bad-argument EXEC takes no arguments, got "x""#),
        (#"EXEC x every=1s"#, #"ERR bad-argument EXEC takes no arguments, got "x""#),
        (#"CANCEL"#, #"ERR missing-argument CANCEL needs at least one job name"#),
        (#"CANCEL a=1"#, #"ERR bad-argument CANCEL takes no options, got a="#),
        (#"CANCEL a -- x"#, #"ERR bad-argument CANCEL takes no program after --"#),
        (#"CANCEL 'bad name'"#, #"ERR bad-argument invalid job name "bad name": only letters, digits, '_', '.' and '-' are allowed"#),
        (#"CANCEL tag=a tag=b"#, #"ERR bad-argument CANCEL takes one tag="#),
        (#"CANCEL x tag=t"#, #"ERR bad-argument CANCEL takes job names or tag=, not both (got "x")"#),
        (#"CANCEL tag=t a=1"#, #"ERR bad-argument CANCEL does not take a="#),
        (#"CANCEL tag=t -- x"#, #"ERR bad-argument CANCEL takes no program after --"#),
        (#"CANCEL tag='bad tag'"#, #"ERR bad-argument tag: invalid tag "bad tag": 1 to 64 letters, digits, '_', '.' or '-'"#),
        (#"CANCEL tag=t now"#, #"ERR bad-argument CANCEL takes job names or tag=, not both (got "now")"#),
        (#"PAUSE"#, #"ERR missing-argument PAUSE needs at least one job name"#),
        (#"PAUSE tag=t x"#, #"ERR bad-argument PAUSE takes job names or tag=, not both (got "x")"#),
        (#"PAUSE a b=1"#, #"ERR bad-argument PAUSE takes no options, got b="#),
        (#"PAUSE tag="#, #"ERR bad-argument tag: invalid tag "": 1 to 64 letters, digits, '_', '.' or '-'"#),
        (#"RESUME"#, #"ERR missing-argument RESUME needs at least one job name"#),
        (#"RESUME a foo=1"#, #"ERR bad-argument RESUME takes only tag=TAG and after=DUR, not foo="#),
        (#"RESUME a after=soon"#, #"ERR bad-argument after: invalid duration "soon": expected a number (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)"#),
        (#"RESUME a now after=1s"#, #"ERR bad-argument give either now or after=DUR, not both"#),
        (#"RESUME a after=1s after=2s"#, #"ERR bad-argument give either now or after=DUR, not both"#),
        (#"RESUME tag=t x"#, #"ERR bad-argument RESUME takes job names or tag=, not both (got "x")"#),
        (#"RESUME tag=t foo=1"#, #"ERR bad-argument RESUME does not take foo="#),
        (#"RESUME tag=t now after=1s"#, #"ERR bad-argument give either now or after=DUR, not both"#),
        (#"RESUME a -- x"#, #"ERR bad-argument RESUME takes no program after --"#),
        (#"RESUME now -- x"#, #"ERR bad-argument RESUME takes no program after --"#),
        (#"RESUME 'bad name'"#, #"ERR bad-argument invalid job name "bad name": only letters, digits, '_', '.' and '-' are allowed"#),
        (#"RESUME after=1s"#, #"ERR missing-argument RESUME needs at least one job name"#),
        (#"RESUME tag=t now x"#, #"ERR bad-argument RESUME takes job names or tag=, not both (got "x")"#),
        (#"RESUME tag=t tag=u"#, #"ERR bad-argument RESUME takes one tag="#),
        (#"RESUME a after="#, #"ERR bad-argument after: invalid duration "": empty (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)"#),
        (#"RESUME a after=1s foo=2"#, #"ERR bad-argument RESUME takes only tag=TAG and after=DUR, not foo="#),
        (#"RESUME a foo=2 after=x"#, #"ERR bad-argument RESUME takes only tag=TAG and after=DUR, not foo="#),
        (#"RESUME tag=t after=x"#, #"ERR bad-argument after: invalid duration "x": expected a number (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)"#),
        (#"RESUME tag=t -- now"#, #"ERR bad-argument RESUME takes no program after --"#),
        (#"RESUME now 'bad name'"#, #"ERR bad-argument invalid job name "bad name": only letters, digits, '_', '.' and '-' are allowed"#),
        (#"RUN"#, #"ERR missing-argument RUN needs a job name"#),
        (#"RUN a b"#, #"ERR bad-argument RUN takes one job name; unexpected "b""#),
        (#"RUN a x=1"#, #"ERR bad-argument RUN takes env=NAME=VALUE and force=yes|no, got x="#),
        (#"RUN a env=1X=2"#, #"ERR bad-argument env: invalid name "1X" (letters, digits and _ only)"#),
        (#"RUN a force=maybe"#, #"ERR bad-argument force: expected yes or no, got "maybe""#),
        (#"RUN ''"#, #"ERR bad-argument invalid job name "": must be 1 to 64 characters"#),
        (#"LIST x"#, #"ERR bad-argument LIST takes no arguments, got "x""#),
        (#"LIST x=1"#, #"ERR bad-argument LIST takes no options, got x="#),
        (#"LIST tag=t x"#, #"ERR bad-argument LIST takes job names or tag=, not both (got "x")"#),
        (#"LIST tag=a tag=b"#, #"ERR bad-argument LIST takes one tag="#),
        (#"LIST -- a"#, #"ERR bad-argument LIST takes no program after --"#),
        (#"LIST tag=t -- a"#, #"ERR bad-argument LIST takes no program after --"#),
        (#"LIST tag=t x=1"#, #"ERR bad-argument LIST does not take x="#),
        (#"SHOW"#, #"ERR missing-argument SHOW needs a job name"#),
        (#"SHOW a b"#, #"ERR bad-argument SHOW takes one job name; unexpected "b""#),
        (#"SHOW a x=1"#, #"ERR bad-argument SHOW takes no options, got x="#),
        (#"HISTORY"#, #"ERR missing-argument HISTORY needs a job name"#),
        (#"HISTORY a b"#, #"ERR bad-argument HISTORY takes one job name; unexpected "b""#),
        (#"HISTORY a limit=0"#, #"ERR bad-argument limit: expected a whole number from 1 to 10000, got "0""#),
        (#"HISTORY a limit=abc"#, #"ERR bad-argument limit: expected a whole number from 1 to 10000, got "abc""#),
        (#"HISTORY a limit=10001"#, #"ERR bad-argument limit: expected a whole number from 1 to 10000, got "10001""#),
        (#"HISTORY a foo=1"#, #"ERR bad-argument HISTORY takes only limit=N, not foo="#),
        (#"HISTORY a -- x"#, #"ERR bad-argument HISTORY takes no program after --"#),
        (#"HISTORY a limit=+5"#, #"ERR bad-argument limit: expected a whole number from 1 to 10000, got "+5""#),
        (#"HISTORY a limit=99999999999999999999"#, #"ERR bad-argument limit: expected a whole number from 1 to 10000, got "99999999999999999999""#),
        (#"HISTORY a limit="#, #"ERR bad-argument limit: expected a whole number from 1 to 10000, got """#),
        (#"HISTORY limit=5"#, #"ERR missing-argument HISTORY needs a job name"#),
        (#"HISTORY a limit=5 limit=0"#, #"ERR bad-argument limit: expected a whole number from 1 to 10000, got "0""#),
        (#"WHY"#, #"ERR missing-argument WHY needs a job name"#),
        (#"WHY a limit=51"#, #"ERR bad-argument limit: expected a whole number from 1 to 50, got "51""#),
        (#"WHY a bad=1"#, #"ERR bad-argument WHY takes only limit=N, not bad="#),
        (#"WHY a b"#, #"ERR bad-argument WHY takes one job name; unexpected "b""#),
        (#"WHY a limit=-1"#, #"ERR bad-argument limit: expected a whole number from 1 to 50, got "-1""#),
        (#"MODE a b"#, #"ERR bad-argument MODE takes one mode name; unexpected "b""#),
        (#"MODE 'bad mode'"#, #"ERR bad-argument invalid mode name "bad mode": only letters, digits, '_', '.' and '-' are allowed"#),
        (#"MODE x=1"#, #"ERR bad-argument MODE takes no options, got x="#),
        (#"MODE -- x y"#, #"ERR bad-argument MODE takes no program after --"#),
        (#"WATCH a b"#, #"ERR bad-argument WATCH takes one job name; unexpected "b""#),
        (#"WATCH x=1"#, #"ERR bad-argument WATCH takes no options, got x="#),
        (#"WATCH tag=t a"#, #"ERR bad-argument WATCH takes job names or tag=, not both (got "a")"#),
        (#"WATCH tag=a tag=b"#, #"ERR bad-argument WATCH takes one tag="#),
        (#"WATCH 'bad name'"#, #"ERR bad-argument invalid job name "bad name": only letters, digits, '_', '.' and '-' are allowed"#),
        (#"WATCH -- a"#, #"ERR bad-argument WATCH takes no program after --"#),
        (#"WATCH tag=t x=1"#, #"ERR bad-argument WATCH does not take x="#),
        (#"NEXT a"#, #"ERR bad-argument NEXT takes no arguments, got "a""#),
        (#"NEXT -- x"#, #"ERR bad-argument NEXT takes no program after --"#),
        (#"NEXT a every=1s"#, #"ERR bad-argument NEXT takes no arguments, got "a""#),
    ]

    @Test func eachVerbsGrammarErrorsAreTheDaemonsOwn() async {
        for (line, reply) in Self.errors {
            #expect(await handler.handle(.line(Array(line.utf8)), connection: 1).encode() == reply, "\(line)")
        }
    }

    /// The daemon's answer to a line with a grammar error is the decoder's error, word for word: it
    /// checks nothing of its own before decoding (timerctl gets the same error from the decoder).
    @Test func theDaemonAnswersTheDecodersErrors() async throws {
        for (line, _) in Self.errors {
            let decoded: Reply
            do {
                _ = try ControlCommand(Request.parse(line))
                Issue.record("\(line) decodes")
                continue
            } catch {
                decoded = Reply(error)
            }
            #expect(await handler.handle(.line(Array(line.utf8)), connection: 1) == decoded, "\(line)")
        }
    }
}
