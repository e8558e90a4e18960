/// One HTTP request as timerd makes them, for webhooks and for the etcd client: what `HTTPExchange`
/// turns into libcurl options. Only `http://` and `https://` URLs (redirects too); never a signal.
public struct HTTPRequest: Sendable {
    public var url: String
    /// `GET`, `HEAD`, `POST`, or any other method name (sent as is).
    public var method: String
    /// Whole header lines (`Name: value`). An `Expect:` line is always added: no "Expect: 100-continue"
    /// round trip before a body.
    public var headers: [String]
    /// Sent as is, with its length; nil: none (a POST sends an empty one).
    public var body: [UInt8]?
    /// The whole transfer's limit; nil: none (a stream).
    public var timeout: Duration?
    /// The connection's limit; nil: libcurl's default (the transfer's `timeout` still applies).
    public var connectTimeout: Duration?
    /// How many redirects are followed; 0: none (a 3xx is the response).
    public var redirects: Int
    public var tls: HTTPTLS
    public var userAgent: String?
    /// Straight to the host, never through a proxy named in the environment (`http_proxy`, ...).
    public var bypassProxy: Bool
    /// How much of the response body is kept.
    public var keep: BodyKeeping

    public enum BodyKeeping: Sendable, Equatable {
        /// All of it.
        case all
        /// Its last `n` bytes.
        case last(Int)
    }

    public init(url: String, method: String = "GET", headers: [String] = [], body: [UInt8]? = nil,
                timeout: Duration? = nil, connectTimeout: Duration? = nil, redirects: Int = 0, tls: HTTPTLS = HTTPTLS(),
                userAgent: String? = nil, bypassProxy: Bool = false, keep: BodyKeeping = .all) {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.connectTimeout = connectTimeout
        self.redirects = redirects
        self.tls = tls
        self.userAgent = userAgent
        self.bypassProxy = bypassProxy
        self.keep = keep
    }
}

/// TLS for `https://` URLs (PEM files). nil files: libcurl's defaults (the system's CA store, no client
/// certificate).
public struct HTTPTLS: Sendable, Equatable {
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    /// false: neither the certificate nor the host name is checked (`insecure=yes` webhooks).
    public var verify: Bool

    public init(caFile: String? = nil, certFile: String? = nil, keyFile: String? = nil, verify: Bool = true) {
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.verify = verify
    }
}

/// How an exchange ended: the status and body received, and why it failed if it did. A failed transfer
/// may still have a status (the headers came, then the body timed out) and part of a body.
public struct HTTPResponse: Sendable {
    /// nil when no reply arrived.
    public var status: Int?
    /// What was kept of the body (`HTTPRequest.keep`).
    public var body: [UInt8]
    /// nil when the transfer completed (whatever the status).
    public var failure: HTTPFailure?

    public init(status: Int?, body: [UInt8], failure: HTTPFailure?) {
        self.status = status
        self.body = body
        self.failure = failure
    }
}

/// Why a transfer did not complete: libcurl's words for it (its error buffer, else the code's text), and
/// what kind of failure that is.
public struct HTTPFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The request's `timeout` passed.
        case timedOut
        /// The host (or proxy) name did not resolve.
        case resolve
        /// No connection (refused, unreachable, the connect timeout passed).
        case connect
        /// TLS handshake or verification.
        case tls
        /// More redirects than the request's `redirects`.
        case tooManyRedirects
        /// libcurl could not be loaded or could not take the transfer (out of memory).
        case setup
        /// Anything else (the connection broke, a protocol error, ...).
        case other
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
