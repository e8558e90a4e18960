import Testing
import TimerdCore
import TimerdProtocol
@testable import TimerdDaemon

/// Which pipelined requests a connection lets start while earlier ones wait for their commit (and sends
/// to the registry together, `docs/architecture.md`, "A burst of requests").
@Suite struct ConnectionTests {
    private func changesNamedJobs(_ line: String) -> Bool {
        Connection.changesNamedJobs(ControlHandler.parse(.line(Array(line.utf8))))
    }

    @Test func changesOfNamedJobsGoTogetherAndSelectionsWait() {
        for line in ["ADD a every=1h command=true", "ADD a every=1h tag=bulk -- /bin/true", "EXEC start=1s tag=t command=true",
                     "RUN a", "CANCEL a b", "PAUSE a", "RESUME a now"] {
            #expect(changesNamedJobs(line), "\(line)")
        }
        // A `tag=` selection, reads, and lines in error wait for every earlier request.
        for line in ["CANCEL tag=bulk", "PAUSE tag=t", "RESUME tag=t", "LIST", "SHOW a", "MODE night", "STATS", "ADD a command='unterminated", "NOSUCHVERB a"] {
            #expect(!changesNamedJobs(line), "\(line)")
        }
    }
}
