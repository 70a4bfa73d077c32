/**
 * The Vulkan devices this machine offers, asked of the Vulkan loader itself (`libvulkan.so.1`, through
 * FFI): each device's name and whether it is a CPU (software) device. WebGPU's Dawn runs on Vulkan here
 * and prefers a GPU to a CPU device, so when every device is a CPU one (Mesa's lavapipe, named
 * "llvmpipe (LLVM …)"), the webgpu provider computes on the CPU and its timings say nothing of a GPU.
 *
 * Why this signal: onnxruntime does not tell which adapter the WebGPU provider took, and the installed
 * ICD files (/usr/share/vulkan/icd.d) list drivers, not devices (Mesa installs the Intel and AMD drivers
 * beside lavapipe on machines with neither GPU). The loader enumerates the devices Dawn chooses from.
 *
 * @module
 */

/** One Vulkan physical device. */
export interface VulkanDevice {
  name: string;
  /** VK_PHYSICAL_DEVICE_TYPE_CPU: a software rasteriser such as lavapipe. */
  cpu: boolean;
}

const VK_SUCCESS = 0;
const VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1;
const VK_PHYSICAL_DEVICE_TYPE_CPU = 4;
/** sizeof(VkInstanceCreateInfo) on 64-bit targets. */
const INSTANCE_CREATE_INFO_BYTES = 64;
/** sizeof(VkPhysicalDeviceProperties) is 824 on 64-bit targets; room to spare. */
const PROPERTIES_BYTES = 1024;
/** Offsets in VkPhysicalDeviceProperties: deviceType (after four uint32), then deviceName[256]. */
const DEVICE_TYPE_OFFSET = 16;
const DEVICE_NAME_OFFSET = 20;
const DEVICE_NAME_BYTES = 256;

const SYMBOLS = {
  vkCreateInstance: { parameters: ["buffer", "pointer", "buffer"], result: "i32" },
  vkDestroyInstance: { parameters: ["pointer", "pointer"], result: "void" },
  vkEnumeratePhysicalDevices: { parameters: ["pointer", "buffer", "buffer"], result: "i32" },
  vkGetPhysicalDeviceProperties: { parameters: ["pointer", "buffer"], result: "void" },
} as const;

type Vulkan = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

/**
 * The devices the Vulkan loader lists, or null where there is no loader, no FFI permission or no
 * instance (then nothing is known, and nothing should be claimed).
 */
export function vulkanDevices(): VulkanDevice[] | null {
  let library: Deno.DynamicLibrary<typeof SYMBOLS>;
  try {
    library = Deno.dlopen("libvulkan.so.1", SYMBOLS);
  } catch {
    return null;
  }
  try {
    return listDevices(library.symbols);
  } finally {
    library.close();
  }
}

function listDevices(vk: Vulkan): VulkanDevice[] | null {
  const info = new Uint8Array(INSTANCE_CREATE_INFO_BYTES); // no application info, layers or extensions
  new DataView(info.buffer).setUint32(0, VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, true);
  const instanceOut = new BigUint64Array(1);
  if (vk.vkCreateInstance(info, null, instanceOut) !== VK_SUCCESS) return null;
  const instance = Deno.UnsafePointer.create(instanceOut[0]);
  try {
    const count = new Uint32Array(1);
    if (vk.vkEnumeratePhysicalDevices(instance, count, null) !== VK_SUCCESS) return null;
    const handles = new BigUint64Array(count[0]);
    if (vk.vkEnumeratePhysicalDevices(instance, count, handles) !== VK_SUCCESS) return null;
    return [...handles.subarray(0, count[0])].map((handle) => deviceOf(vk, handle));
  } finally {
    vk.vkDestroyInstance(instance, null);
  }
}

function deviceOf(vk: Vulkan, handle: bigint): VulkanDevice {
  const properties = new Uint8Array(PROPERTIES_BYTES);
  vk.vkGetPhysicalDeviceProperties(Deno.UnsafePointer.create(handle), properties);
  const type = new DataView(properties.buffer).getUint32(DEVICE_TYPE_OFFSET, true);
  const nameBytes = properties.subarray(DEVICE_NAME_OFFSET, DEVICE_NAME_OFFSET + DEVICE_NAME_BYTES);
  const end = nameBytes.indexOf(0);
  const name = new TextDecoder().decode(nameBytes.subarray(0, end === -1 ? undefined : end));
  return { name, cpu: type === VK_PHYSICAL_DEVICE_TYPE_CPU };
}
