import CTimerdCurl
import TimerdSystem

/// One HTTP POST of a JSON body on its own libcurl easy handle: the options every etcd request shares,
/// and the reply body collected as it arrives. Used by one thread at a time (the one making the call, or
/// the watch's); hence `@unchecked Sendable` is not claimed: it never leaves that thread.
final class CurlExchange {
    let easy: UnsafeMutableRawPointer
    /// Where the handle goes back when the exchange ends (nil: it is cleaned up).
    private let pool: CurlHandlePool?
    /// What has arrived of the reply body and not been taken yet.
    var received: [UInt8] = []
    private var headers: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

    /// nil when libcurl cannot make a handle (out of memory). `timeout` 0: none (a stream); the connection
    /// itself must be up within `connectTimeout` either way.
    /// With a `pool`, the handle comes from it (with its open connections) and goes back to it.
    init?(url: String, body: [UInt8], timeout: Duration, connectTimeout: Duration, tls: EtcdTLS?, pool: CurlHandlePool? = nil) {
        guard let easy = pool?.take() ?? tcurl_easy_init() else { return nil }
        self.easy = easy
        self.pool = pool
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        _ = tcurl_easy_setopt_string(easy, CURLOPT_URL, url)
        _ = tcurl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        // Straight to the member: never through an http_proxy from the environment.
        _ = tcurl_easy_setopt_string(easy, CURLOPT_PROXY, "")
        _ = tcurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = tcurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Self.milliseconds(timeout))
        _ = tcurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, max(1, Self.milliseconds(connectTimeout)))
        _ = tcurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        if let tls {
            if let ca = tls.caFile { _ = tcurl_easy_setopt_string(easy, CURLOPT_CAINFO, ca) }
            if let cert = tls.certFile { _ = tcurl_easy_setopt_string(easy, CURLOPT_SSLCERT, cert) }
            if let key = tls.keyFile { _ = tcurl_easy_setopt_string(easy, CURLOPT_SSLKEY, key) }
        }
        _ = tcurl_easy_setopt_long(easy, CURLOPT_POST, 1)
        _ = tcurl_easy_setopt_long(easy, CURLOPT_POSTFIELDSIZE, body.count)
        body.withUnsafeBufferPointer { bytes in
            _ = tcurl_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress))
        }
        // No "Expect: 100-continue" round trip before a body.
        for line in ["Content-Type: application/json", "Expect:"] { headers = tcurl_slist_append(headers, line) }
        _ = tcurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headers)
        _ = tcurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(self).toOpaque())
        _ = tcurl_easy_setopt_write(easy) { data, size, count, context in
            let exchange = Unmanaged<CurlExchange>.fromOpaque(context!).takeUnretainedValue()
            let bytes = size * count
            exchange.received.append(contentsOf: UnsafeRawBufferPointer(start: data, count: bytes))
            return bytes
        }
    }

    deinit {
        if let pool { pool.give(easy) } else { tcurl_easy_cleanup(easy) }
        tcurl_slist_free_all(headers)
        errorBuffer.deallocate()
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }

    /// The HTTP status of the reply (0 before one arrived).
    var status: Int {
        var status = 0
        _ = tcurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return status
    }

    /// Why a transfer failed with `code`: libcurl's message for this transfer, else for the code.
    func failure(_ code: CURLcode) -> String {
        let detail = String(cString: errorBuffer)
        return detail.isEmpty ? String(cString: tcurl_easy_strerror(code)) : detail
    }

    /// The whole exchange, blocking: the status and body, or why there is none.
    func perform() -> Result<(status: Int, body: [UInt8]), TransportFailure> {
        let code = tcurl_easy_perform(easy)
        guard code == CURLE_OK else { return .failure(TransportFailure(failure(code))) }
        return .success((status, received))
    }

    /// Removes and returns the complete lines (without their `\n`) received so far.
    func takeLines() -> [[UInt8]] {
        guard let last = received.lastIndex(of: UInt8(ascii: "\n")) else { return [] }
        let lines = received[..<last].split(separator: UInt8(ascii: "\n")).map(Array.init)
        received.removeSubrange(...last)
        return lines
    }
}

/// No HTTP reply: connection refused, timed out, TLS, ... (libcurl's words).
struct TransportFailure: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

/// Idle easy handles kept for the next request: a handle keeps its connections open, so a request
/// reuses the TCP (and TLS) connection of an earlier one instead of opening one each time (a claim is
/// one request; a new connection per claim also left a socket in TIME_WAIT per claim).
final class CurlHandlePool: @unchecked Sendable {
    /// A handle owned by the pool while idle (only one thread uses it at a time).
    private struct Idle: @unchecked Sendable { let easy: UnsafeMutableRawPointer }
    private let idle = Locked<[Idle]>([])
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    deinit { for handle in idle.withLock({ $0 }) { tcurl_easy_cleanup(handle.easy) } }

    /// An idle handle with its options reset (its connections kept), or nil when none is idle.
    func take() -> UnsafeMutableRawPointer? {
        guard let handle = idle.withLock({ $0.popLast() }) else { return nil }
        tcurl_easy_reset(handle.easy)
        return handle.easy
    }

    /// Keeps `easy` for a later request, or cleans it up when enough are idle.
    func give(_ easy: UnsafeMutableRawPointer) {
        let handle = Idle(easy: easy)
        let kept = idle.withLock { handles -> Bool in
            guard handles.count < capacity else { return false }
            handles.append(handle)
            return true
        }
        if !kept { tcurl_easy_cleanup(easy) }
    }
}
