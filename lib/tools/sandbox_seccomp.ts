/**
 * A seccomp filter for the jail (bwrap `--seccomp`), closing the ways to hold memory that is neither in
 * a sized tmpfs mount nor in the program's own mappings, and so outside every limit: `memfd_create`
 * and `memfd_secret` (a file in memory, kept alive by a descriptor; thousands of them are allowed) and
 * `shmget` (System V shared memory, kept alive by the IPC namespace after the program detaches). They
 * fail with ENOSYS, as on a kernel without them, so programs that fall back on a temp file still run.
 * The io_uring family (`io_uring_setup`, `io_uring_enter`, `io_uring_register`) is refused the same way,
 * as Docker's default profile does: its kernel threads do the program's I/O outside the checks that
 * seccomp makes of the calls themselves, and it is a frequent home of kernel bugs.
 *
 * The filter is a classic BPF program (the form bwrap reads), built here for x86_64 and aarch64: the
 * architecture is checked first, and system calls of any other ABI (32-bit `int 0x80` calls, x32) are
 * refused altogether, since their numbers differ. On other architectures there is no filter.
 *
 * @module
 */

/** io_uring_setup, io_uring_enter, io_uring_register: one number on every architecture (asm-generic). */
const IO_URING = [425, 426, 427];

/** Per architecture: its AUDIT_ARCH value and the numbers of the system calls refused. */
const ARCHES: Record<string, { audit: number; refused: number[]; x32: boolean }> = {
  // memfd_create 319, memfd_secret 447, shmget 29, io_uring_setup/enter/register 425-427
  x86_64: { audit: 0xc000003e, refused: [319, 447, 29, ...IO_URING], x32: true },
  // memfd_create 279, memfd_secret 447, shmget 194, io_uring_setup/enter/register 425-427
  aarch64: { audit: 0xc00000b7, refused: [279, 447, 194, ...IO_URING], x32: false },
};

const BPF_LD_W_ABS = 0x20;
const BPF_JEQ_K = 0x15;
const BPF_JGE_K = 0x35;
const BPF_RET_K = 0x06;
const SECCOMP_RET_ALLOW = 0x7fff0000;
const SECCOMP_RET_ERRNO = 0x00050000;
const ENOSYS = 38;
/** Offsets in struct seccomp_data. */
const NR_OFFSET = 0;
const ARCH_OFFSET = 4;
/** x32 system calls are x86_64 numbers with this bit set. */
const X32_SYSCALL_BIT = 0x40000000;

interface Instruction {
  code: number;
  k: number;
  /** A jump: to the final "refuse" instruction when the test comes out this way, else to the next one. */
  refuseWhen?: boolean;
}

/** The compiled filter for `arch` (Deno.build.arch), or undefined where none is known. */
export function seccompFilter(arch: string = Deno.build.arch): Uint8Array | undefined {
  const spec = ARCHES[arch];
  if (spec === undefined) return undefined;
  const body: Instruction[] = [
    { code: BPF_LD_W_ABS, k: ARCH_OFFSET },
    { code: BPF_JEQ_K, k: spec.audit, refuseWhen: false }, // another ABI: every call refused
    { code: BPF_LD_W_ABS, k: NR_OFFSET },
    ...(spec.x32 ? [{ code: BPF_JGE_K, k: X32_SYSCALL_BIT, refuseWhen: true }] : []),
    ...spec.refused.map((nr) => ({ code: BPF_JEQ_K, k: nr, refuseWhen: true })),
    { code: BPF_RET_K, k: SECCOMP_RET_ALLOW },
    { code: BPF_RET_K, k: SECCOMP_RET_ERRNO | ENOSYS },
  ];
  const refuse = body.length - 1;
  const bytes = new Uint8Array(body.length * 8);
  const view = new DataView(bytes.buffer);
  // struct sock_filter { u16 code; u8 jt; u8 jf; u32 k; }, little-endian on both architectures.
  body.forEach((ins, i) => {
    const toRefuse = refuse - (i + 1); // jumps count the instructions skipped
    view.setUint16(i * 8, ins.code, true);
    view.setUint8(i * 8 + 2, ins.refuseWhen === true ? toRefuse : 0);
    view.setUint8(i * 8 + 3, ins.refuseWhen === false ? toRefuse : 0);
    view.setUint32(i * 8 + 4, ins.k, true);
  });
  return bytes;
}
