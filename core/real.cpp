// The resolver of the real-function table (see real.hpp).
//
// It finds a symbol the way glibc's dlsym/dlvsym do (elf/dl-lookup.c,
// do_lookup_x and check_match), reading the dynamic symbol tables of the
// objects dl_iterate_phdr reports (the caller's namespace, in load order,
// which for the start-up objects is the global scope's order):
// - scope Next starts after the object holding this code (libgoshim.so, or
//   a unit test's executable), scope Any at the first object; the vDSO is
//   not in the global scope and is skipped;
// - a symbol matches if it has the name, is global, weak or unique, has a
//   type dlsym accepts (no-type, object, function, common, TLS, indirect
//   function) and a value (or is TLS or absolute);
// - without a version (dlsym): an unversioned definition, else the one
//   non-hidden (default) version the object has; with a version (dlvsym):
//   exactly that version name (hidden or not), or any definition in an
//   object without version information;
// - the value: load address + st_value (absolute symbols: st_value); an
//   indirect function's resolver is called; a TLS symbol gives the calling
//   thread's instance, kept as an offset from the thread pointer.
// No allocation, no lock of goshim's, no errno, no call to an interposed
// function: dl_iterate_phdr takes only ld.so's recursive lock.
#include "core/real.hpp"

#include <elf.h>
#include <link.h>
#include <sys/auxv.h>

#include <atomic>

#include "arch/arch.hpp"
#include "core/rawlog.hpp"

namespace goshim::real {

#define GOSHIM_REAL_DEF(name, type, scope, version, since) std::type_identity_t<type> name = 0;
GOSHIM_REAL_TABLE(GOSHIM_REAL_DEF)
#undef GOSHIM_REAL_DEF

const Entry table[] = {
#define GOSHIM_REAL_ENTRY(name, type, scope, version, since) \
  {#name, Scope::scope, version, since, (void*)&name},
    GOSHIM_REAL_TABLE(GOSHIM_REAL_ENTRY)
#undef GOSHIM_REAL_ENTRY
};

static_assert(sizeof(table) / sizeof(table[0]) == kEntries);

namespace {

static_assert(sizeof(void*) == sizeof(uintptr_t));

std::atomic<bool> table_done{false};

struct Query {
  const char* name;
  Scope scope;
  const char* version;
  uint32_t gnu_hash;
  uint32_t elf_hash;
  bool found;
  uintptr_t value;
};

struct Walk {
  Query* q;
  unsigned n;
  unsigned left;
  bool past_self;  // the object holding this code has been seen
  uintptr_t self_pc;
  uintptr_t vdso;
  uintptr_t tp;
};

bool streq(const char* a, const char* b) {
  while (*a && *a == *b) a++, b++;
  return *a == *b;
}

uint32_t gnu_hash_of(const char* s) {
  uint32_t h = 5381;
  for (; *s; s++) h = h * 33 + (unsigned char)*s;
  return h;
}

uint32_t elf_hash_of(const char* s) {
  uint32_t h = 0;
  for (; *s; s++) {
    h = (h << 4) + (unsigned char)*s;
    uint32_t g = h & 0xf0000000;
    if (g) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

// One object's dynamic symbol table.
struct Obj {
  uintptr_t base;
  void* tls_data;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const uint32_t* gnu_hash = nullptr;
  const uint32_t* elf_hash = nullptr;
  const ElfW(Half)* versym = nullptr;
  const ElfW(Verdef)* verdef = nullptr;
  const ElfW(Verneed)* verneed = nullptr;
};

// ld.so relocates the pointers of a dynamic section in place (unless the
// section is read-only): an unrelocated one is an offset below the base.
uintptr_t dptr(const Obj& o, ElfW(Addr) p) { return p < o.base ? o.base + p : p; }

// The version name of versym index ndx (a definition's or, for an
// undefined symbol, a needed version's), or nullptr.
const char* version_name(const Obj& o, unsigned ndx) {
  if (const ElfW(Verdef)* vd = o.verdef) {
    for (;;) {
      if ((vd->vd_ndx & 0x7fff) == ndx) {
        auto* aux = (const ElfW(Verdaux)*)((const char*)vd + vd->vd_aux);
        return o.strtab + aux->vda_name;
      }
      if (!vd->vd_next) break;
      vd = (const ElfW(Verdef)*)((const char*)vd + vd->vd_next);
    }
  }
  if (const ElfW(Verneed)* vn = o.verneed) {
    for (;;) {
      auto* a = (const ElfW(Vernaux)*)((const char*)vn + vn->vn_aux);
      for (unsigned i = 0; i < vn->vn_cnt; i++) {
        if ((a->vna_other & 0x7fff) == ndx) return o.strtab + a->vna_name;
        if (!a->vna_next) break;
        a = (const ElfW(Vernaux)*)((const char*)a + a->vna_next);
      }
      if (!vn->vn_next) break;
      vn = (const ElfW(Verneed)*)((const char*)vn + vn->vn_next);
    }
  }
  return nullptr;
}

// check_match without the version rules: a definition dlsym may return.
bool usable(const ElfW(Sym)* s) {
  unsigned type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
  constexpr unsigned kAllowed = (1u << STT_NOTYPE) | (1u << STT_OBJECT) | (1u << STT_FUNC) |
                                (1u << STT_COMMON) | (1u << STT_TLS) | (1u << STT_GNU_IFUNC);
  if (type > 31 || !((1u << type) & kAllowed)) return false;
  if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) return false;
  if (s->st_value == 0 && s->st_shndx != SHN_ABS && type != STT_TLS) return false;
  return true;
}

// The version rules for symbol index i: 1 matches, 0 does not, 2 is the
// object's default version of an unversioned lookup (kept as a candidate).
int version_match(const Obj& o, const Query& q, unsigned i) {
  if (!o.versym) return 1;
  unsigned ndx = o.versym[i] & 0x7fff;
  bool hidden = o.versym[i] & 0x8000;
  if (q.version) {
    const char* vn = ndx >= 2 ? version_name(o, ndx) : nullptr;
    return vn && streq(vn, q.version);
  }
  if (ndx < 2) return 1;
  return hidden ? 0 : 2;
}

// Looks q up in o; sets q.value and returns true if found.
bool lookup_in(const Obj& o, Query& q, const Walk& w) {
  const ElfW(Sym)* hit = nullptr;
  const ElfW(Sym)* candidate = nullptr;
  int ncandidates = 0;
  auto consider = [&](unsigned i) {
    const ElfW(Sym)* s = &o.symtab[i];
    if (!usable(s) || !streq(o.strtab + s->st_name, q.name)) return false;
    int m = version_match(o, q, i);
    if (m == 1) {
      hit = s;
      return true;
    }
    if (m == 2 && ncandidates++ == 0) candidate = s;
    return false;
  };
  if (o.gnu_hash) {
    const uint32_t* gh = o.gnu_hash;
    uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2], shift = gh[3];
    const ElfW(Addr)* bloom = (const ElfW(Addr)*)&gh[4];
    const uint32_t* buckets = (const uint32_t*)&bloom[bloom_size];
    const uint32_t* chain = &buckets[nbuckets];
    constexpr unsigned kBits = sizeof(ElfW(Addr)) * 8;
    uint32_t h = q.gnu_hash;
    ElfW(Addr) word = bloom[(h / kBits) & (bloom_size - 1)];
    ElfW(Addr) mask = ((ElfW(Addr))1 << (h % kBits)) | ((ElfW(Addr))1 << ((h >> shift) % kBits));
    if (nbuckets && (word & mask) == mask) {
      uint32_t i = buckets[h % nbuckets];
      if (i >= symoffset) {
        for (;; i++) {
          uint32_t h2 = chain[i - symoffset];
          if (((h ^ h2) >> 1) == 0 && consider(i)) break;
          if (h2 & 1) break;
        }
      }
    }
  } else if (o.elf_hash) {
    const uint32_t* eh = o.elf_hash;
    uint32_t nbucket = eh[0];
    const uint32_t* bucket = &eh[2];
    const uint32_t* chain = &bucket[nbucket];
    if (nbucket)
      for (uint32_t i = bucket[q.elf_hash % nbucket]; i != STN_UNDEF; i = chain[i])
        if (consider(i)) break;
  }
  if (!hit && ncandidates == 1) hit = candidate;
  if (!hit) return false;
  unsigned type = ELF64_ST_TYPE(hit->st_info);
  if (type == STT_TLS) {
    if (!o.tls_data) return false;  // not allocated for this thread
    q.value = (uintptr_t)o.tls_data + hit->st_value - w.tp;
  } else {
    uintptr_t v = (hit->st_shndx == SHN_ABS ? 0 : o.base) + hit->st_value;
    if (type == STT_GNU_IFUNC) v = ((uintptr_t(*)(void))v)();
    q.value = v;
  }
  return true;
}

int on_object(struct dl_phdr_info* info, size_t size, void* arg) {
  Walk& w = *(Walk*)arg;
  Obj o;
  o.base = info->dlpi_addr;
  o.tls_data = size >= offsetof(struct dl_phdr_info, dlpi_tls_data) + sizeof(void*)
                   ? info->dlpi_tls_data
                   : nullptr;
  const ElfW(Dyn)* dyn = nullptr;
  bool self = false;
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn)*)(o.base + ph->p_vaddr);
    if (ph->p_type == PT_LOAD && w.self_pc - (o.base + ph->p_vaddr) < ph->p_memsz) self = true;
  }
  bool vdso = w.vdso && (uintptr_t)info->dlpi_phdr - w.vdso < 4096;
  bool next_ok = w.past_self;
  if (self) w.past_self = true;
  if (!dyn || vdso) return 0;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    switch (dyn->d_tag) {
      case DT_SYMTAB: o.symtab = (const ElfW(Sym)*)dptr(o, dyn->d_un.d_ptr); break;
      case DT_STRTAB: o.strtab = (const char*)dptr(o, dyn->d_un.d_ptr); break;
      case DT_GNU_HASH: o.gnu_hash = (const uint32_t*)dptr(o, dyn->d_un.d_ptr); break;
      case DT_HASH: o.elf_hash = (const uint32_t*)dptr(o, dyn->d_un.d_ptr); break;
      case DT_VERSYM: o.versym = (const ElfW(Half)*)dptr(o, dyn->d_un.d_ptr); break;
      case DT_VERDEF: o.verdef = (const ElfW(Verdef)*)dptr(o, dyn->d_un.d_ptr); break;
      case DT_VERNEED: o.verneed = (const ElfW(Verneed)*)dptr(o, dyn->d_un.d_ptr); break;
      default: break;
    }
  }
  if (!o.symtab || !o.strtab || (!o.gnu_hash && !o.elf_hash)) return 0;
  for (unsigned i = 0; i < w.n; i++) {
    Query& q = w.q[i];
    if (q.found || (q.scope == Scope::Next && !next_ok)) continue;
    if (lookup_in(o, q, w)) {
      q.found = true;
      if (--w.left == 0) return 1;
    }
  }
  return 0;
}

void walk(Query* q, unsigned n) {
  Walk w{q, n, n, false, (uintptr_t)&walk, (uintptr_t)getauxval(AT_SYSINFO_EHDR),
         arch::get_tp()};
  for (unsigned i = 0; i < n; i++) {
    q[i].gnu_hash = gnu_hash_of(q[i].name);
    q[i].elf_hash = elf_hash_of(q[i].name);
    q[i].found = false;
    q[i].value = 0;
  }
  dl_iterate_phdr(on_object, &w);
}

void store(const Entry& e, uintptr_t v) {
  __atomic_store_n((uintptr_t*)e.cache, v, __ATOMIC_RELEASE);
}

}  // namespace

uintptr_t find(const char* name, Scope scope, const char* version) {
  Query q{name, scope, version, 0, 0, false, 0};
  walk(&q, 1);
  return q.found ? q.value : 0;
}

void resolve() {
  if (table_done.load(std::memory_order_acquire)) return;
  Query q[kEntries];
  for (unsigned i = 0; i < kEntries; i++) q[i] = Query{table[i].name, table[i].scope, table[i].version, 0, 0, false, 0};
  walk(q, kEntries);
  for (unsigned i = 0; i < kEntries; i++)
    if (q[i].found) store(table[i], q[i].value);
  if (!pthread_create || !pthread_join || !pthread_exit)
    fatal("cannot resolve libc's pthread functions (is goshim preloaded into a glibc program?)");
  table_done.store(true, std::memory_order_release);
}

bool resolved() { return table_done.load(std::memory_order_acquire); }

uintptr_t lookup(Sym s) {
  const Entry& e = table[(unsigned)s];
  if (!resolved()) resolve();
  uintptr_t v = __atomic_load_n((uintptr_t*)e.cache, __ATOMIC_ACQUIRE);
  if (v == 0) {
    v = find(e.name, e.scope, e.version);
    if (v) store(e, v);
  }
  return v;
}

}  // namespace goshim::real
