//! `cudaGetDeviceProperties`: CUDA 13.0's `struct cudaDeviceProp`, filled from the driver's
//! device name, UUID, memory size and attributes (each field is one `CU_DEVICE_ATTRIBUTE_*`;
//! the runtime's `cudaDevAttr*` numbers are the same). The layout follows CUDA 13.0's
//! driver_types.h; its size and a few offsets, measured from that header with a C compiler, are
//! checked below at compile time.

use std::ffi::{c_char, c_int, c_uint};
use std::mem::offset_of;

use crate::driver::{self, Driver};
use crate::status::{Rt, check};

/// CUDA 13.0's `struct cudaDeviceProp`.
#[repr(C)]
#[allow(non_snake_case)]
pub(crate) struct DeviceProp {
    name: [c_char; 256],
    uuid: [u8; 16],
    luid: [c_char; 8],
    luidDeviceNodeMask: c_uint,
    totalGlobalMem: usize,
    sharedMemPerBlock: usize,
    regsPerBlock: c_int,
    warpSize: c_int,
    memPitch: usize,
    maxThreadsPerBlock: c_int,
    maxThreadsDim: [c_int; 3],
    maxGridSize: [c_int; 3],
    totalConstMem: usize,
    major: c_int,
    minor: c_int,
    textureAlignment: usize,
    texturePitchAlignment: usize,
    multiProcessorCount: c_int,
    integrated: c_int,
    canMapHostMemory: c_int,
    maxTexture1D: c_int,
    maxTexture1DMipmap: c_int,
    maxTexture2D: [c_int; 2],
    maxTexture2DMipmap: [c_int; 2],
    maxTexture2DLinear: [c_int; 3],
    maxTexture2DGather: [c_int; 2],
    maxTexture3D: [c_int; 3],
    maxTexture3DAlt: [c_int; 3],
    maxTextureCubemap: c_int,
    maxTexture1DLayered: [c_int; 2],
    maxTexture2DLayered: [c_int; 3],
    maxTextureCubemapLayered: [c_int; 2],
    maxSurface1D: c_int,
    maxSurface2D: [c_int; 2],
    maxSurface3D: [c_int; 3],
    maxSurface1DLayered: [c_int; 2],
    maxSurface2DLayered: [c_int; 3],
    maxSurfaceCubemap: c_int,
    maxSurfaceCubemapLayered: [c_int; 2],
    surfaceAlignment: usize,
    concurrentKernels: c_int,
    ECCEnabled: c_int,
    pciBusID: c_int,
    pciDeviceID: c_int,
    pciDomainID: c_int,
    tccDriver: c_int,
    asyncEngineCount: c_int,
    unifiedAddressing: c_int,
    memoryBusWidth: c_int,
    l2CacheSize: c_int,
    persistingL2CacheMaxSize: c_int,
    maxThreadsPerMultiProcessor: c_int,
    streamPrioritiesSupported: c_int,
    globalL1CacheSupported: c_int,
    localL1CacheSupported: c_int,
    sharedMemPerMultiprocessor: usize,
    regsPerMultiprocessor: c_int,
    managedMemory: c_int,
    isMultiGpuBoard: c_int,
    multiGpuBoardGroupID: c_int,
    hostNativeAtomicSupported: c_int,
    pageableMemoryAccess: c_int,
    concurrentManagedAccess: c_int,
    computePreemptionSupported: c_int,
    canUseHostPointerForRegisteredMem: c_int,
    cooperativeLaunch: c_int,
    sharedMemPerBlockOptin: usize,
    pageableMemoryAccessUsesHostPageTables: c_int,
    directManagedMemAccessFromHost: c_int,
    maxBlocksPerMultiProcessor: c_int,
    accessPolicyMaxWindowSize: c_int,
    reservedSharedMemPerBlock: usize,
    hostRegisterSupported: c_int,
    sparseCudaArraySupported: c_int,
    hostRegisterReadOnlySupported: c_int,
    timelineSemaphoreInteropSupported: c_int,
    memoryPoolsSupported: c_int,
    gpuDirectRDMASupported: c_int,
    gpuDirectRDMAFlushWritesOptions: c_uint,
    gpuDirectRDMAWritesOrdering: c_int,
    memoryPoolSupportedHandleTypes: c_uint,
    deferredMappingCudaArraySupported: c_int,
    ipcEventSupported: c_int,
    clusterLaunch: c_int,
    unifiedFunctionPointers: c_int,
    deviceNumaConfig: c_int,
    deviceNumaId: c_int,
    mpsEnabled: c_int,
    hostNumaId: c_int,
    gpuPciDeviceID: c_uint,
    gpuPciSubsystemID: c_uint,
    hostNumaMultinodeIpcSupported: c_int,
    reserved: [c_int; 56],
}

// Measured with `cc` from CUDA 13.0's driver_types.h (sizeof and offsetof).
const _: () = assert!(size_of::<DeviceProp>() == 1008);
const _: () = assert!(offset_of!(DeviceProp, totalGlobalMem) == 288);
const _: () = assert!(offset_of!(DeviceProp, major) == 360);
const _: () = assert!(offset_of!(DeviceProp, surfaceAlignment) == 552);
const _: () = assert!(offset_of!(DeviceProp, sharedMemPerBlockOptin) == 672);
const _: () = assert!(offset_of!(DeviceProp, reservedSharedMemPerBlock) == 696);
const _: () = assert!(offset_of!(DeviceProp, gpuPciDeviceID) == 772);
const _: () = assert!(offset_of!(DeviceProp, reserved) == 784);

/// One device's attributes, queried one at a time.
struct Attributes<'a> {
    d: &'a Driver,
    dev: c_int,
}

impl Attributes<'_> {
    fn get(&self, attr: c_int) -> Result<c_int, Rt> {
        let mut v = 0;
        // SAFETY: `v` is a valid out-pointer, `dev` a device from the driver.
        check(unsafe { (self.d.cuDeviceGetAttribute)(&mut v, attr, self.dev) })?;
        Ok(v)
    }

    fn size(&self, attr: c_int) -> Result<usize, Rt> {
        // Sizes are never negative; a driver that said so would be answered 0.
        Ok(usize::try_from(self.get(attr)?).unwrap_or(0))
    }

    fn unsigned(&self, attr: c_int) -> Result<c_uint, Rt> {
        Ok(self.get(attr)?.cast_unsigned())
    }

    fn all<const N: usize>(&self, attrs: [c_int; N]) -> Result<[c_int; N], Rt> {
        let mut out = [0; N];
        for (o, a) in out.iter_mut().zip(attrs) {
            *o = self.get(a)?;
        }
        Ok(out)
    }
}

/// The properties of device `device` (an ordinal).
pub(crate) fn properties(device: c_int) -> Result<DeviceProp, Rt> {
    let d = driver::driver()?;
    let mut dev = 0;
    // SAFETY: `dev` is a valid out-pointer; a bad ordinal is the driver's error.
    check(unsafe { (d.cuDeviceGet)(&mut dev, device) })?;
    let mut name = [0 as c_char; 256];
    // SAFETY: `name` holds 256 bytes, the length passed; the driver NUL-terminates.
    check(unsafe { (d.cuDeviceGetName)(name.as_mut_ptr(), 256, dev) })?;
    name[255] = 0;
    let mut uuid = [0u8; 16];
    // SAFETY: `uuid` is a valid 16-byte `CUuuid`.
    check(unsafe { (d.cuDeviceGetUuid_v2)(uuid.as_mut_ptr(), dev) })?;
    let mut total = 0;
    // SAFETY: `total` is a valid out-pointer.
    check(unsafe { (d.cuDeviceTotalMem_v2)(&mut total, dev) })?;
    let a = Attributes { d, dev };
    Ok(DeviceProp {
        name,
        uuid,
        luid: [0; 8],
        luidDeviceNodeMask: 0,
        totalGlobalMem: total,
        sharedMemPerBlock: a.size(8)?,
        regsPerBlock: a.get(12)?,
        warpSize: a.get(10)?,
        memPitch: a.size(11)?,
        maxThreadsPerBlock: a.get(1)?,
        maxThreadsDim: a.all([2, 3, 4])?,
        maxGridSize: a.all([5, 6, 7])?,
        totalConstMem: a.size(9)?,
        major: a.get(75)?,
        minor: a.get(76)?,
        textureAlignment: a.size(14)?,
        texturePitchAlignment: a.size(51)?,
        multiProcessorCount: a.get(16)?,
        integrated: a.get(18)?,
        canMapHostMemory: a.get(19)?,
        maxTexture1D: a.get(21)?,
        maxTexture1DMipmap: a.get(77)?,
        maxTexture2D: a.all([22, 23])?,
        maxTexture2DMipmap: a.all([73, 74])?,
        maxTexture2DLinear: a.all([70, 71, 72])?,
        maxTexture2DGather: a.all([45, 46])?,
        maxTexture3D: a.all([24, 25, 26])?,
        maxTexture3DAlt: a.all([47, 48, 49])?,
        maxTextureCubemap: a.get(52)?,
        maxTexture1DLayered: a.all([42, 43])?,
        maxTexture2DLayered: a.all([27, 28, 29])?,
        maxTextureCubemapLayered: a.all([53, 54])?,
        maxSurface1D: a.get(55)?,
        maxSurface2D: a.all([56, 57])?,
        maxSurface3D: a.all([58, 59, 60])?,
        maxSurface1DLayered: a.all([61, 62])?,
        maxSurface2DLayered: a.all([63, 64, 65])?,
        maxSurfaceCubemap: a.get(66)?,
        maxSurfaceCubemapLayered: a.all([67, 68])?,
        surfaceAlignment: a.size(30)?,
        concurrentKernels: a.get(31)?,
        ECCEnabled: a.get(32)?,
        pciBusID: a.get(33)?,
        pciDeviceID: a.get(34)?,
        pciDomainID: a.get(50)?,
        tccDriver: a.get(35)?,
        asyncEngineCount: a.get(40)?,
        unifiedAddressing: a.get(41)?,
        memoryBusWidth: a.get(37)?,
        l2CacheSize: a.get(38)?,
        persistingL2CacheMaxSize: a.get(108)?,
        maxThreadsPerMultiProcessor: a.get(39)?,
        streamPrioritiesSupported: a.get(78)?,
        globalL1CacheSupported: a.get(79)?,
        localL1CacheSupported: a.get(80)?,
        sharedMemPerMultiprocessor: a.size(81)?,
        regsPerMultiprocessor: a.get(82)?,
        managedMemory: a.get(83)?,
        isMultiGpuBoard: a.get(84)?,
        multiGpuBoardGroupID: a.get(85)?,
        hostNativeAtomicSupported: a.get(86)?,
        pageableMemoryAccess: a.get(88)?,
        concurrentManagedAccess: a.get(89)?,
        computePreemptionSupported: a.get(90)?,
        canUseHostPointerForRegisteredMem: a.get(91)?,
        cooperativeLaunch: a.get(95)?,
        sharedMemPerBlockOptin: a.size(97)?,
        pageableMemoryAccessUsesHostPageTables: a.get(100)?,
        directManagedMemAccessFromHost: a.get(101)?,
        maxBlocksPerMultiProcessor: a.get(106)?,
        accessPolicyMaxWindowSize: a.get(109)?,
        reservedSharedMemPerBlock: a.size(111)?,
        hostRegisterSupported: a.get(99)?,
        sparseCudaArraySupported: a.get(112)?,
        hostRegisterReadOnlySupported: a.get(113)?,
        timelineSemaphoreInteropSupported: a.get(114)?,
        memoryPoolsSupported: a.get(115)?,
        gpuDirectRDMASupported: a.get(116)?,
        gpuDirectRDMAFlushWritesOptions: a.unsigned(117)?,
        gpuDirectRDMAWritesOrdering: a.get(118)?,
        memoryPoolSupportedHandleTypes: a.unsigned(119)?,
        deferredMappingCudaArraySupported: a.get(121)?,
        ipcEventSupported: a.get(125)?,
        clusterLaunch: a.get(120)?,
        unifiedFunctionPointers: a.get(129)?,
        deviceNumaConfig: a.get(130)?,
        deviceNumaId: a.get(131)?,
        mpsEnabled: a.get(133)?,
        hostNumaId: a.get(134)?,
        gpuPciDeviceID: a.unsigned(139)?,
        gpuPciSubsystemID: a.unsigned(140)?,
        hostNumaMultinodeIpcSupported: a.get(143)?,
        reserved: [0; 56],
    })
}
