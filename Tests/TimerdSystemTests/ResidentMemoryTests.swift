import Testing

@testable import TimerdSystem

/// `ResidentMemory` gives pages back; what it drops must come back intact when used (code and read-only
/// data are mapped again from the file; nothing written is ever dropped).
@Suite struct ResidentMemoryTests {
    static let table: [String: Int] = ["one": 1, "two": 2, "three": 3]

    @Test func droppedCodeAndConstantsWorkAgain() {
        let before = (Self.table.values.sorted(), "constant \(42)", [3, 1, 2].sorted())
        #expect(ResidentMemory.dropReadOnlyPages() > 0)
        #expect(Self.table.values.sorted() == before.0)
        #expect("constant \(42)" == before.1)
        #expect([3, 1, 2].sorted() == before.2)
    }

    @Test func trimmedHeapStillAllocates() {
        var blocks = (0..<1_000).map { [UInt8](repeating: UInt8($0 % 256), count: 4_096) }
        blocks.removeAll()
        ResidentMemory.trimMalloc()
        let again = [UInt8](repeating: 7, count: 1 << 20)
        #expect(again.allSatisfy { $0 == 7 })
    }
}
