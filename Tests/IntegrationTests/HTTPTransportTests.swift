import Dispatch
import Glibc
import Synchronization
import Testing
import TimerdHTTP
import TimerdSystem

/// TimerdHTTP, the one libcurl transport of webhooks and the etcd client, against the loopback server of
/// `webhook_server.py`: the blocking exchange with its handle pool, a stream's lines, the session on a
/// queue, and how failures are classified. (The webhook and etcd tests cover each user's behaviour.)
@Suite struct HTTPTransportTests {
    init() throws { try HTTPLibrary.load("libcurl.so.4") }

    @Test func aBlockingExchangeSendsTheRequestAndKeepsTheBody() throws {
        let server = try WebhookServer(script: ["/a": [.status(201, body: "0123456789")]])
        let pool = HTTPHandlePool(capacity: 2)
        for keep in [HTTPRequest.BodyKeeping.all, .last(4)] {
            let request = HTTPRequest(url: server.url("/a"), headers: ["Content-Type: application/json", "X-Test: 1"],
                                      body: Array(#"{"k":"v"}"#.utf8), timeout: .seconds(5), connectTimeout: .seconds(5),
                                      userAgent: "timerd-test", bypassProxy: true, keep: keep)
            let response = try #require(HTTPExchange(request, pool: pool)).perform()
            #expect(response.failure == nil)
            #expect(response.status == 201)
            #expect(String(decoding: response.body, as: UTF8.self) == (keep == .all ? "0123456789" : "6789"))
        }
        let received = server.waitForRequests("/a", count: 2)
        #expect(received.count == 2)
        for request in received {
            #expect(request.method == "POST" && request.body == #"{"k":"v"}"#)
            #expect(request.headers["content-type"] == "application/json" && request.headers["x-test"] == "1")
            #expect(request.headers["user-agent"] == "timerd-test" && request.headers["expect"] == nil)
        }
    }

    @Test func anEmptyBodyIsSentAsAnEmptyBody() throws {
        let server = try WebhookServer()
        let request = HTTPRequest(url: server.url("/empty"), method: "PUT", body: [], timeout: .seconds(5))
        let response = try #require(HTTPExchange(request)).perform()
        #expect(response.status == 200)
        let received = try #require(server.waitForRequests("/empty").first)
        #expect(received.method == "PUT" && received.body == "" && received.headers["content-length"] == "0")
    }

    @Test func failuresAreClassified() throws {
        let server = try WebhookServer(script: ["/stuck": [.hang], "/loop": [.status(302, headers: ["Location": "/loop"])]])
        let stuck = try #require(HTTPExchange(HTTPRequest(url: server.url("/stuck"), timeout: .milliseconds(300)))).perform()
        #expect(stuck.failure?.kind == .timedOut)
        let loop = try #require(HTTPExchange(HTTPRequest(url: server.url("/loop"), method: "GET", timeout: .seconds(5), redirects: 2))).perform()
        #expect(loop.failure?.kind == .tooManyRedirects)
        let notFollowed = try #require(HTTPExchange(HTTPRequest(url: server.url("/loop"), method: "GET", timeout: .seconds(5)))).perform()
        #expect(notFollowed.failure == nil && notFollowed.status == 302)
        // A port nothing listens on: bind one, note it, close it.
        let refused = try #require(HTTPExchange(HTTPRequest(url: "http://127.0.0.1:\(try Self.closedPort())/x", timeout: .seconds(5)))).perform()
        #expect(refused.failure?.kind == .connect && refused.status == nil)
        let ftp = try #require(HTTPExchange(HTTPRequest(url: "ftp://127.0.0.1/x", timeout: .seconds(5)))).perform()
        #expect(ftp.failure?.kind == .other)
    }

    @Test func aStreamHandsOverLinesAndEndsWithTheRest() throws {
        let server = try WebhookServer(script: ["/stream": [.status(200, body: "one\ntwo\n\nthree\nrest")]])
        var lines: [String] = []
        let end = try #require(HTTPExchange(HTTPRequest(url: server.url("/stream"), connectTimeout: .seconds(5))))
            .stream(checkEvery: .milliseconds(50), check: { () -> Int? in nil }, line: { line in
                lines.append(String(decoding: line, as: UTF8.self))
                return nil
            })
        #expect(lines == ["one", "two", "three"])
        guard case .ended(let response) = end else { Issue.record("stopped: \(end)"); return }
        #expect(response.failure == nil && response.status == 200 && response.body == Array("rest".utf8))
        // `check` ends a stream that sends nothing.
        let hanging = try WebhookServer(script: ["/quiet": [.hang]])
        var checks = 0
        let stopped = try #require(HTTPExchange(HTTPRequest(url: hanging.url("/quiet"))))
            .stream(checkEvery: .milliseconds(20), check: { () -> String? in
                checks += 1
                return checks == 10 ? "enough" : nil
            }, line: { _ in "unexpected" })
        guard case .stopped("enough") = stopped else { Issue.record("\(stopped)"); return }
    }

    @Test func aSessionRunsExchangesOnItsQueue() throws {
        let server = try WebhookServer(script: ["/slow": [.status(200, body: "slow", delay: 0.3)], "/stuck": [.hang]])
        let queue = DispatchQueue(label: "test.http")
        let session = try queue.sync { () throws(HTTPFailure) -> HTTPSession in
            try HTTPSession(queue: queue, library: "libcurl.so.4") { trouble in Issue.record("\(trouble)") }
        }
        let results = Mutex<[String: HTTPResponse]>([:])
        let abandoned = Mutex(false)
        let exchanges = queue.sync { () -> [HTTPExchange] in
            var started: [HTTPExchange] = []
            for path in ["/slow", "/fast", "/stuck"] {
                let exchange = HTTPExchange(HTTPRequest(url: server.url(path), method: "GET", timeout: .seconds(10)))!
                started.append(exchange)
                session.start(exchange) { response in
                    dispatchPrecondition(condition: .onQueue(queue))
                    if path == "/stuck" { abandoned.withLock { $0 = true } }
                    results.withLock { $0[path] = response }
                }
            }
            return started
        }
        #expect(eventually(timeout: 10, "both answers") { results.withLock { $0.count == 2 } })
        queue.sync { session.abandon(exchanges[2]) }
        let (slow, fast) = results.withLock { ($0["/slow"], $0["/fast"]) }
        #expect(slow?.status == 200 && slow?.body == Array("slow".utf8))
        #expect(fast?.status == 200 && fast?.body == Array("ok".utf8))
        usleep(200_000)
        #expect(!abandoned.withLock { $0 }, "an abandoned exchange never reports")
        queue.sync { session.close() }
    }

    /// A loopback TCP port that was free a moment ago and is closed now.
    static func closedPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                guard bind(fd, raw, length) == 0, getsockname(fd, raw, &length) == 0 else { throw HarnessError("bind failed") }
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
