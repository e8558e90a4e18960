import Testing
import TimerdProtocol
import TimerdSystem
@testable import TimerdCLI

/// `--json` output passed on as it arrives (`DaemonClient.relay`), over a socket.
@Suite struct RelayTests {
    /// Relays the reply of a fake daemon answering `reply`; what was written, chunk by chunk.
    private func relay(_ reply: String?, writable: Int = .max) throws -> (Result<DaemonClient.Relayed, ClientError>, [[UInt8]], String?) {
        let daemon = try FakeDaemon(reply: reply)
        defer { daemon.stop() }
        var chunks: [[UInt8]] = []
        let result = Result { () throws(ClientError) in
            try DaemonClient.relay(Request(verb: .list), to: daemon.path, timeout: 10) { bytes in
                chunks.append(bytes)
                return chunks.count < writable
            }
        }
        return (result, chunks, daemon.requestLine())
    }

    @Test func anOKPayloadGoesOnAsItArrivesWithItsNewline() throws {
        let (result, chunks, request) = try relay("OK [{\"name\":\"a\"}]\n")
        #expect(try result.get() == .payload)
        #expect(String(decoding: chunks.joined(), as: UTF8.self) == "[{\"name\":\"a\"}]\n")
        #expect(request == "LIST\n")
    }

    @Test func aLongPayloadComesInManyChunksByteForByte() throws {
        // 2 MB: more than one read, more than the socket's buffer.
        let item = "{\"name\":\"job\",\"options\":[\"every=1h\"]}"
        let payload = "[" + Array(repeating: item, count: 50_000).joined(separator: ",") + "]"
        let (result, chunks, _) = try relay("OK " + payload + "\n")
        #expect(try result.get() == .payload)
        #expect(chunks.count > 1)
        #expect(chunks.joined().elementsEqual((payload + "\n").utf8))
    }

    @Test func otherRepliesAreReadWhole() throws {
        let (refused, refusedChunks, _) = try relay("ERR no-such-job no job named x\n")
        #expect(try refused.get() == .reply(.err(code: "no-such-job", message: "no job named x")))
        #expect(refusedChunks.isEmpty)
        let (bare, bareChunks, _) = try relay("OK\n")
        #expect(try bare.get() == .reply(.ok(nil)))
        #expect(bareChunks.isEmpty)
        // A last line without its newline still counts, as for any reply.
        let (short, _, _) = try relay("OK")
        #expect(try short.get() == .reply(.ok(nil)))
        let (none, _, _) = try relay(nil)
        #expect(throws: ClientError.self) { try none.get() }
    }

    @Test func aPayloadCutShortIsAnErrorAfterWhatCame() throws {
        let (result, chunks, _) = try relay("OK [1,2")
        #expect(String(decoding: chunks.joined(), as: UTF8.self) == "[1,2")
        guard case .failure(.badReply(_, let why)) = result else {
            Issue.record("expected a bad reply, got \(result)")
            return
        }
        #expect(why == "the reply ended after 4 bytes, before its end of line")
    }

    @Test func nothingAfterTheNewlineAndAClosedStdoutStops() throws {
        let (result, chunks, _) = try relay("OK [1]\nOK [2]\n")
        #expect(try result.get() == .payload)
        #expect(String(decoding: chunks.joined(), as: UTF8.self) == "[1]\n")
        let item = String(repeating: "x", count: 1000)
        let (stopped, written, _) = try relay("OK [\"" + Array(repeating: item, count: 4000).joined() + "\"]\n", writable: 1)
        #expect(try stopped.get() == .payload)
        #expect(written.count == 1)
    }

    @Test func timerctlJSONPrintsThePayloadAsReceived() throws {
        let daemon = try FakeDaemon(reply: "OK [{\"name\":\"a\",\"state\":\"scheduled\"}]\n")
        defer { daemon.stop() }
        let result = runCLIForReal(["--socket", daemon.path, "list", "--json"])
        #expect(result.status == 0)
        #expect(result.stdout == "[{\"name\":\"a\",\"state\":\"scheduled\"}]\n")
        #expect(result.stderr == "")

        let refusing = try FakeDaemon(reply: "ERR no-such-job no job named x\n")
        defer { refusing.stop() }
        let refused = runCLIForReal(["--socket", refusing.path, "show", "x", "--json"])
        #expect(refused.status == 1)
        #expect(refused.stdout == "")
        #expect(refused.stderr == "timerctl: no job named x (no-such-job)\n")
    }
}
