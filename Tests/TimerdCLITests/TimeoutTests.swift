import Testing
import TimerdProtocol
import TimerdSystem
@testable import TimerdCLI

@Suite struct TimeoutTests {
    @Test func aDaemonThatNeverAnswersTimesOut() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/timerd.sock"
        // Listening but never accepting: connect succeeds (backlog), no reply ever comes.
        let listener = try UnixSocket.listen(path: path)
        defer { try? listener.close() }
        #expect(throws: ClientError.timedOut(path: path, seconds: 0.2)) {
            try DaemonClient.send(Request(verb: .ping), to: path, timeout: 0.2)
        }
        #expect(ClientError.timedOut(path: path, seconds: 30).message
            == "timerctl: timerd on \(path) did not answer within 30s (set TIMERCTL_TIMEOUT to wait longer)\n")
    }

    @Test func theTimeoutComesFromTheEnvironment() {
        #expect(DaemonClient.timeout(from: [:]) == 30)
        #expect(DaemonClient.timeout(from: ["TIMERCTL_TIMEOUT": "2.5"]) == 2.5)
        #expect(DaemonClient.timeout(from: ["TIMERCTL_TIMEOUT": "0"]) == 30)
        #expect(DaemonClient.timeout(from: ["TIMERCTL_TIMEOUT": "soon"]) == 30)
    }
}
